package installer

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/notifytest"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/systemd"
	"golang.org/x/sys/unix"
)

// expectReadyAndWatchdog reads READY=1 and then two WATCHDOG=1 from n,
// all from pid.
func expectReadyAndWatchdog(t *testing.T, n *notifytest.Socket, who string, pid int32) {
	t.Helper()
	msg, from := n.Next(t, 60*time.Second)
	if msg != "READY=1\nSTATUS=serving" || from != pid {
		t.Fatalf("%s: first notification %q from pid %d, want READY=1 from %d", who, msg, from, pid)
	}
	for i := 0; i < 2; i++ {
		msg, from = n.Next(t, 30*time.Second)
		if msg != "WATCHDOG=1" || from != pid {
			t.Fatalf("%s: notification %q from pid %d, want WATCHDOG=1 from %d", who, msg, from, pid)
		}
	}
}

// buildDaemons builds the real steward-operator and steward-controller.
func buildDaemons(t *testing.T) string {
	t.Helper()
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			testenv.Missing(t, "no go command to build the daemons")
		}
	}
	bin := t.TempDir()
	cmd := exec.Command(gobin, "build", "-o", bin+"/", "../cmd/steward-operator", "../cmd/steward-controller")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startDaemon(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", cmd.Path, logs.String())
		}
	})
	return cmd
}

// TestDaemonsNotifyAndWatchdog runs the real daemons the way their units
// do: with NOTIFY_SOCKET and WATCHDOG_USEC set, the host binding its own
// route socket and the controller on the three sockets systemd passes
// (systemd-socket-activate stands in for the .socket units). Each must say
// READY=1 from its own pid (NotifyAccess=main) and then keep the watchdog
// fed; the controller must serve the passed foreground socket.
func TestDaemonsNotifyAndWatchdog(t *testing.T) {
	testenv.NeedRoot(t, "to dial the foreground socket, which admits root only")
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		testenv.Missing(t, "systemd-socket-activate is not installed (.ci/run installs systemd)")
	}
	bin := buildDaemons(t)
	l, stop := startDev(t) // provisions a store, keys, a bundle and a config
	stop()
	// A stopped dev stack removes its sockets' directory; the daemons here
	// bind the same socket paths.
	if err := os.Mkdir(l.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(l.Run) })

	ns := notifytest.Listen(t)
	watch := []string{"NOTIFY_SOCKET=" + ns.Path, "WATCHDOG_USEC=200000"}
	host := exec.Command(filepath.Join(bin, "steward-operator"), "serve", "--store", l.OperatorStore)
	host.Env = append(os.Environ(), watch...)
	startDaemon(t, host)
	expectReadyAndWatchdog(t, ns, "steward-operator", int32(host.Process.Pid))
	var st unix.Stat_t
	if err := unix.Lstat(l.ForwardSocket, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Mode&0o7777 != systemd.RouteSocketMode {
		t.Fatalf("the host's route socket %s: %v, mode %o", l.ForwardSocket, err, st.Mode)
	}

	// A notify socket of its own: the host keeps pinging the first.
	ns = notifytest.Listen(t)
	watch[0] = "NOTIFY_SOCKET=" + ns.Path
	ctl := exec.Command(activate,
		"--listen="+l.ForegroundSocket, "--listen="+l.MCPSocket,
		"--fdname="+systemd.FDForeground+":"+systemd.FDMCP,
		"--setenv="+watch[0], "--setenv="+watch[1],
		filepath.Join(bin, "steward-controller"), "serve", "--config", l.Config)
	stderr, err := ctl.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctl.Process.Kill()
		ctl.Wait()
	})
	// systemd-socket-activate says on stderr when the sockets are bound, and
	// starts the controller on the first connection.
	bound := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		n := 0
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Listening on ") {
				if n++; n == 2 {
					bound <- nil
				}
			}
		}
		bound <- errors.New("systemd-socket-activate's stderr closed before it bound two sockets")
	}()
	select {
	case err := <-bound:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("systemd-socket-activate did not bind within 30 s")
	}
	wake, err := net.Dial("unix", l.MCPSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer wake.Close()
	expectReadyAndWatchdog(t, ns, "steward-controller", int32(ctl.Process.Pid))

	// The controller answers on the foreground socket systemd bound.
	env := Env{EUID: 0, Controller: ControllerEnv{Config: l.Config, Foreground: l.ForegroundSocket}}
	code, out, errs := run(t, env, "controller-tool-result", "0123abcd")
	if code != ExitRefused || out != "" || !strings.Contains(errs, `the controller refused the request: no foreground request "0123abcd"`) {
		t.Fatalf("controller-tool-result through the passed socket: exit %d\n%s%s", code, out, errs)
	}
}
