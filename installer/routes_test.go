package installer

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/systemd"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestRouteFindingsControlSocket: status reports the host's control
// socket of the installed bundle (running when the socket is there) and
// the routes the bundle carried; a bundle built before the control socket
// is one the controller refuses, and status says so and how to rebuild.
func TestRouteFindingsControlSocket(t *testing.T) {
	root := t.TempDir()
	tr := tree{root: root}
	bundlePath := tr.abs(rel(systemd.DefaultControllerBundle))
	if err := os.MkdirAll(filepath.Dir(bundlePath), 0o700); err != nil {
		t.Fatal(err)
	}
	install := func(b []byte) {
		if err := os.WriteFile(bundlePath, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	key, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	old, err := msg.SignBundle(key, msg.Bundle{Controller: "ctl", HostKey: key.Public().MarshalCOSEKey(), HostUID: 4344})
	if err != nil {
		t.Fatal(err)
	}
	install(old)
	got := routeFindings(tr, ControllerEnv{}, nil)
	want := "the bundle for controller ctl names no control socket (built before the host had one), so the controller refuses it: " +
		"rebuild it with `steward-operator bundle build ctl` and install it"
	if len(got) != 1 || got[0].Kind != "control" || got[0].State != stateDiffers || got[0].Detail != want {
		t.Fatalf("an old bundle: %+v", got)
	}

	install(makeBundle(t, "ctl"))
	sock := tr.abs(rel(systemd.ControlSocketPath("ctl")))
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got = routeFindings(tr, ControllerEnv{}, nil)
	if len(got) != 2 || got[0].Kind != "control" || got[0].Name != systemd.ControlSocketPath("ctl") || got[0].State != stateOK ||
		!strings.HasSuffix(got[0].Detail, "its live routes are the controller's applications; running (the host's socket is there)") {
		t.Fatalf("the control socket: %+v", got)
	}
	if got[1].Kind != "route" || got[1].State != stateDown || !strings.HasPrefix(got[1].Detail, "in the bundle as built: application appliance") {
		t.Fatalf("the bundle's route: %+v", got[1])
	}
}
