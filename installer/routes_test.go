package installer

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/controller"
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

// writeTreeConfig installs, in the tree at root, a controller config in
// the installed layout whose sockets.mcpHTTP is mcpHTTP ("" for none).
func writeTreeConfig(t *testing.T, root, mcpHTTP string) {
	t.Helper()
	writeTreeConfigSockets(t, root, controller.Sockets{MCPHTTP: mcpHTTP})
}

// writeTreeConfigSockets is writeTreeConfig with the optional sockets of
// own (mcpHTTP, advisor); the others are the installed layout's.
func writeTreeConfigSockets(t *testing.T, root string, own controller.Sockets) {
	t.Helper()
	c := controller.Config{
		Name: "ctl", StateDir: systemd.ControllerStateDir, KeyDir: filepath.Join(systemd.ControllerStateDir, "keys"),
		Bundle: systemd.DefaultControllerBundle,
		Sockets: controller.Sockets{MCP: systemd.MCPSocketPath, Reverse: systemd.ReverseSocketPath,
			Foreground: systemd.ForegroundSocketPath, MCPHTTP: own.MCPHTTP, Advisor: own.Advisor},
		Agents: controller.Agents{UIDs: []uint32{2001}, GIDs: []uint32{}},
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.ParseConfig(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, systemd.DefaultControllerConfig), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// treeStatus runs status on the tree at root, wanting nothing on stderr.
func treeStatus(t *testing.T, root string) func() (int, string) {
	return func() (int, string) {
		t.Helper()
		code, out, errs := run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin)
		if errs != "" {
			t.Fatalf("status: stderr %q", errs)
		}
		return code, out
	}
}

// TestStatusMCPHTTPSocket: on the tree install lays out, status reports
// the streamable HTTP socket the controller's config names: not served
// while it is not there (no installation fault), served with its owner and
// mode 0666 once it is, a mode other than 0666 as differing, and a path
// outside the controller's runtime directory as a finding that fails
// status. A config without it reports no such socket.
func TestStatusMCPHTTPSocket(t *testing.T) {
	root := installTree(t)
	if m := modeOf(t, filepath.Join(root, systemd.ControllerRuntimeDir)); m&0o7777 != 0o2751 {
		t.Fatalf("install made %s mode %04o, want 2751", systemd.ControllerRuntimeDir, m&0o7777)
	}
	if err := os.WriteFile(filepath.Join(root, systemd.DefaultControllerBundle), makeBundle(t, "ctl"), 0o600); err != nil {
		t.Fatal(err)
	}
	status := treeStatus(t, root)
	sock := filepath.Join(systemd.ControllerRuntimeDir, "mcp-http.sock")
	line := "socket  %s " + filepath.Join(root, sock) + ": MCP over streamable HTTP (sockets.mcpHTTP): %s\n"

	writeTreeConfig(t, root, "")
	if code, out := status(); code != ExitOK || strings.Contains(out, "sockets.mcpHTTP") {
		t.Fatalf("a config without mcpHTTP: exit %d\n%s", code, out)
	}

	writeTreeConfig(t, root, sock)
	want := fmt.Sprintf(line, "absent ", "not served (no socket: the controller is not running)")
	if code, out := status(); code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("not served: exit %d, want the line %q:\n%s", code, want, out)
	}
	listenAt(t, filepath.Join(root, sock), ownSocketMode)
	want = fmt.Sprintf(line, "ok     ", "served (the controller's socket is there), steward-controller:steward-operator 0666")
	if code, out := status(); code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("served: exit %d, want the line %q:\n%s", code, want, out)
	}
	if err := os.Chmod(filepath.Join(root, sock), 0o660); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf(line, "differs", "mode 0660, want 0666")
	if code, out := status(); code != ExitFail || !strings.Contains(out, want) || !strings.Contains(out, "0 missing, 1 differ") {
		t.Fatalf("mode 0660: exit %d, want the line %q:\n%s", code, want, out)
	}

	for _, outside := range []string{"/run/steward/mcp-http.sock", filepath.Join(systemd.ControllerStateDir, "mcp-http.sock"),
		filepath.Join(systemd.ControllerRuntimeDir, "sub", "mcp-http.sock")} {
		writeTreeConfig(t, root, outside)
		want = "socket  differs " + filepath.Join(root, outside) + ": sockets.mcpHTTP is outside the controller's runtime directory /run/steward/controller: " +
			"the installed unit lets the controller bind a socket under /run only there (ProtectSystem=strict, ReadWritePaths=), " +
			"and its state directory is 0700, out of the agents' reach; name /run/steward/controller/mcp-http.sock\n"
		if code, out := status(); code != ExitFail || !strings.Contains(out, want) || !strings.Contains(out, "0 missing, 1 differ") {
			t.Fatalf("%s: exit %d, want the line %q:\n%s", outside, code, want, out)
		}
	}
}

// TestStatusAdvisorSocket: status reports the advisor socket the
// controller's config names as it does the streamable HTTP one: not served
// while it is not there, served with its owner and mode 0666 once it is,
// another mode as differing, and a path outside the controller's runtime
// directory as a finding that fails status; both sockets at once are two
// lines. A config without it reports no such socket.
func TestStatusAdvisorSocket(t *testing.T) {
	root := installTree(t)
	if err := os.WriteFile(filepath.Join(root, systemd.DefaultControllerBundle), makeBundle(t, "ctl"), 0o600); err != nil {
		t.Fatal(err)
	}
	status := treeStatus(t, root)
	sock := filepath.Join(systemd.ControllerRuntimeDir, "advisor.sock")
	line := "socket  %s " + filepath.Join(root, sock) + ": the advisors' MCP socket (sockets.advisor): %s\n"

	writeTreeConfig(t, root, "")
	if code, out := status(); code != ExitOK || strings.Contains(out, "sockets.advisor") {
		t.Fatalf("a config without advisor: exit %d\n%s", code, out)
	}

	writeTreeConfigSockets(t, root, controller.Sockets{Advisor: sock})
	want := fmt.Sprintf(line, "absent ", "not served (no socket: the controller is not running)")
	if code, out := status(); code != ExitOK || !strings.Contains(out, want) || strings.Contains(out, "sockets.mcpHTTP") {
		t.Fatalf("not served: exit %d, want the line %q:\n%s", code, want, out)
	}
	listenAt(t, filepath.Join(root, sock), ownSocketMode)
	want = fmt.Sprintf(line, "ok     ", "served (the controller's socket is there), steward-controller:steward-operator 0666")
	if code, out := status(); code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("served: exit %d, want the line %q:\n%s", code, want, out)
	}
	httpSock := filepath.Join(systemd.ControllerRuntimeDir, "mcp-http.sock")
	writeTreeConfigSockets(t, root, controller.Sockets{MCPHTTP: httpSock, Advisor: sock})
	httpLine := "socket  absent  " + filepath.Join(root, httpSock) + ": MCP over streamable HTTP (sockets.mcpHTTP): not served"
	if code, out := status(); code != ExitOK || !strings.Contains(out, want) || !strings.Contains(out, httpLine) {
		t.Fatalf("both sockets: exit %d, want the lines %q and %q:\n%s", code, want, httpLine, out)
	}
	if err := os.Chmod(filepath.Join(root, sock), 0o660); err != nil {
		t.Fatal(err)
	}
	writeTreeConfigSockets(t, root, controller.Sockets{Advisor: sock})
	want = fmt.Sprintf(line, "differs", "mode 0660, want 0666")
	if code, out := status(); code != ExitFail || !strings.Contains(out, want) || !strings.Contains(out, "0 missing, 1 differ") {
		t.Fatalf("mode 0660: exit %d, want the line %q:\n%s", code, want, out)
	}

	for _, outside := range []string{"/run/steward/advisor.sock", filepath.Join(systemd.ControllerRuntimeDir, "sub", "advisor.sock")} {
		writeTreeConfigSockets(t, root, controller.Sockets{Advisor: outside})
		want = "socket  differs " + filepath.Join(root, outside) + ": sockets.advisor is outside the controller's runtime directory /run/steward/controller: " +
			"the installed unit lets the controller bind a socket under /run only there (ProtectSystem=strict, ReadWritePaths=), " +
			"and its state directory is 0700, out of the agents' reach; name /run/steward/controller/advisor.sock\n"
		if code, out := status(); code != ExitFail || !strings.Contains(out, want) || !strings.Contains(out, "0 missing, 1 differ") {
			t.Fatalf("%s: exit %d, want the line %q:\n%s", outside, code, want, out)
		}
	}
}
