package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// stateHash is the part of a socket directory's name that tells states apart.
func stateHash(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:6])
}

// A state's sockets are not in it but in a short directory of the runtime
// directory, named by its path: a state of any length has sockets that fit.
func TestLayoutSocketsInRuntimeDir(t *testing.T) {
	state := filepath.Join(t.TempDir(), strings.Repeat("s", 150))
	l, err := NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "steward-dev-"+stateHash(state))
	if l.Run != want {
		t.Fatalf("Run = %s, want %s", l.Run, want)
	}
	for _, s := range l.sockets() {
		if filepath.Dir(s) != l.Run {
			t.Errorf("socket %s is not in %s", s, l.Run)
		}
	}
	if l.OperatorStore != filepath.Join(state, "operator") || l.Config != filepath.Join(state, "controller", "config.json") {
		t.Errorf("state paths: %+v", l)
	}
	if _, err := os.Stat(l.Run); !os.IsNotExist(err) {
		t.Errorf("NewLayout created %s: %v", l.Run, err)
	}
	other, _ := NewLayout(state + "2")
	if other.Run == l.Run {
		t.Errorf("two states share the socket directory %s", l.Run)
	}
}

// The default state's sockets are in $XDG_RUNTIME_DIR/steward-dev; without
// XDG_RUNTIME_DIR, in /tmp/steward-dev-UID (here tmpRoot), with the state's
// hash for any other state.
func TestSocketDirNames(t *testing.T) {
	def, err := DefaultStateDir()
	if err != nil {
		t.Fatal(err)
	}
	if def != filepath.Join(os.Getenv("XDG_STATE_HOME"), "steward-dev") {
		t.Fatalf("DefaultStateDir = %s", def)
	}
	other := filepath.Join(t.TempDir(), "s")
	uid := strconv.Itoa(os.Getuid())
	runtime := os.Getenv("XDG_RUNTIME_DIR")
	for _, c := range []struct {
		xdg, state, want string
	}{
		{runtime, def, filepath.Join(runtime, "steward-dev")},
		{runtime, other, filepath.Join(runtime, "steward-dev-"+stateHash(other))},
		{"", def, filepath.Join(tmpRoot, "steward-dev-"+uid)},
		{"", other, filepath.Join(tmpRoot, "steward-dev-"+uid+"-"+stateHash(other))},
		{"relative/run", def, filepath.Join(tmpRoot, "steward-dev-"+uid)},
	} {
		t.Setenv("XDG_RUNTIME_DIR", c.xdg)
		l, err := NewLayout(c.state)
		if err != nil {
			t.Fatal(err)
		}
		if l.Run != c.want {
			t.Errorf("XDG_RUNTIME_DIR=%q, state %s: Run = %s, want %s", c.xdg, c.state, l.Run, c.want)
		}
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if def, _ := DefaultStateDir(); def != "/home/someone/.local/state/steward-dev" {
		t.Errorf("DefaultStateDir without XDG_STATE_HOME = %s", def)
	}
}

// The longest socket name with its slash is longer than what package wire
// adds while it binds, so a directory its longest socket fits in leaves
// room to bind every socket: ensureSocketDir checks only the socket paths.
func TestSocketNamesCoverBindOverhead(t *testing.T) {
	if n := len("/route-appliance.sock"); n < bindOverhead {
		t.Fatalf("the longest socket name is %d bytes with its slash, less than the bind overhead %d", n, bindOverhead)
	}
}

// runtimeOfLength points XDG_RUNTIME_DIR at a new directory such that a
// state's socket directory in it is n bytes long.
func runtimeOfLength(t *testing.T, state string, n int) Layout {
	t.Helper()
	base := filepath.Join(testRoot, "run")
	pad := n - len(base) - len("/steward-dev-") - 12 - 1
	dir := filepath.Join(base, strings.Repeat("r", pad))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("XDG_RUNTIME_DIR", dir)
	l, err := NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Run) != n {
		t.Fatalf("socket directory of %d bytes, want %d", len(l.Run), n)
	}
	return l
}

// A socket directory whose longest socket path (route-appliance.sock) is
// 107 bytes is made; one byte more is refused with the reason.
func TestSocketDirLengthBound(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s")
	limit := maxSunPath - len("/route-appliance.sock")
	l := runtimeOfLength(t, state, limit)
	created, err := l.ensureSocketDir()
	if err != nil || !created {
		t.Fatalf("socket directory of %d bytes: created %v, %v", limit, created, err)
	}
	past := runtimeOfLength(t, state, limit+1)
	_, err = past.ensureSocketDir()
	want := fmt.Sprintf("socket path %s: 108 bytes exceeds the sun_path bound of 107; set XDG_RUNTIME_DIR to a shorter directory", past.ForwardSocket)
	if err == nil || err.Error() != want {
		t.Fatalf("socket directory of %d bytes: err = %v, want %q", limit+1, err, want)
	}
	if _, err := os.Stat(past.Run); !os.IsNotExist(err) {
		t.Errorf("a refused socket directory was created: %v", err)
	}
}

// ensureSocketDir makes the directory 0700 whatever the umask, and takes
// it as it is on a later start.
func TestEnsureSocketDirCreates(t *testing.T) {
	l, _ := NewLayout(filepath.Join(t.TempDir(), "s"))
	created, err := l.ensureSocketDir()
	if err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	if fi, err := os.Stat(l.Run); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	if created, err := l.ensureSocketDir(); err != nil || created {
		t.Fatalf("again: created %v, %v", created, err)
	}
	if err := l.removeSocketDir(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Run); !os.IsNotExist(err) {
		t.Fatalf("after removeSocketDir: %v", err)
	}
}

// A socket directory that others can reach, that is a symbolic link or not
// a directory is refused, each with a one-line reason.
func TestEnsureSocketDirRefuses(t *testing.T) {
	l, _ := NewLayout(filepath.Join(t.TempDir(), "s"))
	t.Cleanup(func() { os.RemoveAll(l.Run) })
	if err := os.Mkdir(l.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o750, 0o701, 0o755, 0o777} {
		if err := os.Chmod(l.Run, mode); err != nil {
			t.Fatal(err)
		}
		_, err := l.ensureSocketDir()
		want := fmt.Sprintf("socket directory %s has mode %04o: refused, want 0700", l.Run, mode)
		if err == nil || err.Error() != want {
			t.Fatalf("mode %04o: err = %v, want %q", mode, err, want)
		}
	}
	os.Remove(l.Run)

	target := t.TempDir()
	if err := os.Symlink(target, l.Run); err != nil {
		t.Fatal(err)
	}
	_, err := l.ensureSocketDir()
	want := fmt.Sprintf("socket directory %s is a symbolic link: refused, it must be a directory of uid %d with mode 0700", l.Run, os.Getuid())
	if err == nil || err.Error() != want {
		t.Fatalf("symlink: err = %v, want %q", err, want)
	}
	os.Remove(l.Run)

	if err := os.WriteFile(l.Run, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = l.ensureSocketDir()
	if want := fmt.Sprintf("socket directory %s is not a directory", l.Run); err == nil || err.Error() != want {
		t.Fatalf("file: err = %v, want %q", err, want)
	}
}

// A socket directory another account made first (in a shared /tmp, say) is
// refused.
func TestEnsureSocketDirRefusesOtherOwner(t *testing.T) {
	testenv.NeedRoot(t, "to give the directory to another uid")
	t.Setenv("XDG_RUNTIME_DIR", "")
	l, _ := NewLayout(filepath.Join(t.TempDir(), "s"))
	t.Cleanup(func() { os.RemoveAll(l.Run) })
	if err := os.Mkdir(l.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(l.Run, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := l.ensureSocketDir()
	want := fmt.Sprintf("socket directory %s is owned by uid 65534, not by uid %d: refused (remove it, or set XDG_RUNTIME_DIR)", l.Run, os.Getuid())
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestManifest(t *testing.T) {
	l, _ := NewLayout(filepath.Join(t.TempDir(), "s"))
	if err := os.MkdirAll(l.State, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.writeManifest(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.ManifestPath())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mcp_socket":        l.MCPSocket,
		"foreground_socket": l.ForegroundSocket,
		"operator_store":    l.OperatorStore,
		"controller_state":  l.Controller,
		"appliance_socket":  l.ApplianceSocket,
		"admin_socket":      l.AdminSocket,
	}
	if len(m) != len(want) {
		t.Fatalf("dev.json has %d keys, want %d: %s", len(m), len(want), b)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("dev.json %s = %q, want %q", k, m[k], v)
		}
	}
}
