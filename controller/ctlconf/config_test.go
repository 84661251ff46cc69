package ctlconf

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestParseBound: a config of MaxConfigBytes is read; one byte more is
// refused before it is decoded, naming the bound.
func TestParseBound(t *testing.T) {
	at := []byte(`{"name":""}` + strings.Repeat(" ", MaxConfigBytes-len(`{"name":""}`)))
	if _, err := Parse(at); err == nil || strings.Contains(err.Error(), "bound") {
		t.Fatalf("at the bound: %v, want the name refused, not the size", err)
	}
	_, err := Parse(append(at, ' '))
	if !errors.Is(err, ErrConfig) || err.Error() != "controller config refused: 65537 bytes exceeds the bound of 65536" {
		t.Fatalf("one past the bound: %v", err)
	}
}

// TestErrorsWrapBoth: a refusal wraps ErrConfig and keeps its cause.
func TestErrorsWrapBoth(t *testing.T) {
	c := &Config{Name: "main", Bundle: filepath.Join(t.TempDir(), "none.bundle")}
	_, err := LoadBundle(c)
	if !errors.Is(err, ErrConfig) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing bundle: %v, want ErrConfig and fs.ErrNotExist", err)
	}
	_, _, err = Load(filepath.Join(t.TempDir(), "none.json"))
	if !errors.Is(err, ErrConfig) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing config: %v, want ErrConfig and fs.ErrNotExist", err)
	}
	if _, err := Parse([]byte(`{"name": 1}`)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "cannot unmarshal number") {
		t.Fatalf("a wrong type: %v", err)
	}
}

// TestRetiredFieldsRefused: a config that still lists its applications
// (toolTask, allowedApplicationLifetimeRoutes) is refused with one line
// that says why and what to do, whichever of the two it has.
func TestRetiredFieldsRefused(t *testing.T) {
	const why = ": no longer part of a controller config: the host's active routes are its applications; "
	for _, c := range []struct {
		fields []string
		want   string
	}{
		{[]string{"toolTask"}, "toolTask" + why + "remove it and enroll the config with steward-installer controller-enroll"},
		{[]string{"allowedApplicationLifetimeRoutes"}, "allowedApplicationLifetimeRoutes" + why + "remove it and enroll the config with steward-installer controller-enroll"},
		{[]string{"toolTask", "allowedApplicationLifetimeRoutes"}, "toolTask and allowedApplicationLifetimeRoutes" + why + "remove them and enroll the config with steward-installer controller-enroll"},
	} {
		var m map[string]any
		if err := json.Unmarshal(agentsConfig(t, map[string]any{"uids": []uint32{}, "gids": []uint32{}}), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(mustJSON(t, m)); err != nil {
			t.Fatalf("the config without them: %v", err)
		}
		for _, f := range c.fields {
			m[f] = map[string]any{}
		}
		_, err := Parse(mustJSON(t, m))
		if !errors.Is(err, ErrConfig) || err.Error() != "controller config refused: "+c.want {
			t.Errorf("%v: %v\nwant %s", c.fields, err, c.want)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadBundleNeedsControl: a bundle built before the host recorded the
// controller's control socket is refused, naming the command that
// rebuilds it; one with it binds the host's key, account and socket.
func TestLoadBundleNeedsControl(t *testing.T) {
	key, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(b msg.Bundle) string {
		signed, err := msg.SignBundle(key, b)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "host.bundle")
		if err := os.WriteFile(p, signed, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := msg.Bundle{Controller: "main", HostKey: key.Public().MarshalCOSEKey(), HostUID: 7, IssuedAt: 1}
	c := &Config{Name: "main", Bundle: write(b)}
	_, err = LoadBundle(c)
	want := "controller config refused: bundle " + c.Bundle + " names no control socket (it was built before the host had one): rebuild it with `steward-operator bundle build main`"
	if !errors.Is(err, ErrConfig) || err.Error() != want {
		t.Fatalf("an old bundle: %v\nwant %s", err, want)
	}
	b.Control = "/run/steward/host/control-main.sock"
	write(b)
	bind, err := LoadBundle(c)
	if err != nil || bind.Bundle.Control != b.Control || bind.Bundle.HostUID != 7 {
		t.Fatalf("a bundle with its control socket: %+v %v", bind, err)
	}
}
