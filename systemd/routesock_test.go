package systemd

import (
	"fmt"
	"github.com/stewardrt/steward/internal/testenv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/wire"
)

// bindRoute is the host binding a route socket the way host.Serve
// does (wire.Listen, Mode RouteSocketMode) at TEST_ROUTE_SOCKET, as
// whatever account the test started it as; it prints "bound" and exits,
// leaving the socket file behind for the test to examine.
func bindRoute() int {
	l, err := wire.Listen(wire.ListenConfig{
		Path: os.Getenv("TEST_ROUTE_SOCKET"), Mode: RouteSocketMode,
		Allow:  func(wire.PeerCred) error { return nil },
		Refuse: func(*net.UnixConn, error) {},
	})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	_ = l // not closed: Close would remove the socket
	fmt.Println("bound")
	return 0
}

// TestRouteSocketInSetgidDir checks what Dirs promises for
// /run/steward/host: a socket the host (not a member of the directory's
// group) binds there with wire.Listen has mode 0660 and the directory's
// group (the controller's) from the moment it exists, with no chown or
// chmod after listen. The host runs as a uid with no account and no
// supplementary groups; the group is one the host is not in.
func TestRouteSocketInSetgidDir(t *testing.T) {
	testenv.NeedRoot(t, "to run the host as another uid and to chown the directory")
	const hostUID, hostGID, ctlGID = 4611, 4611, 4612
	var hostDir Dir
	for _, d := range Dirs() {
		if d.Path == HostRuntimeDir {
			hostDir = d
		}
	}
	if hostDir.Mode != 0o2750 {
		t.Fatalf("%s mode %04o, want 2750", HostRuntimeDir, hostDir.Mode)
	}
	base := t.TempDir()
	// Traversable by the host uid (t.TempDir makes both levels 0700).
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "host")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, hostUID, ctlGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.FileMode(hostDir.Mode&0o777)|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "appliance.sock")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go test binary's own directory is 0700: copy it where the host
	// uid can run it.
	self, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "systemd.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), childEnv+"=bindroute", "TEST_ROUTE_SOCKET="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: hostUID, Gid: hostGID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "bound" {
		t.Fatalf("host child: %v\n%s", err, out)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(sock, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || st.Mode&0o7777 != RouteSocketMode || st.Uid != hostUID || st.Gid != ctlGID {
		t.Fatalf("route socket: mode %o owner %d:%d, want socket %04o %d:%d", st.Mode, st.Uid, st.Gid, RouteSocketMode, hostUID, ctlGID)
	}
}
