package systemd

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/notifytest"
)

func TestReadyAndStopping(t *testing.T) {
	ns := notifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", ns.Path)
	if err := Ready("STATUS=serving 2 routes"); err != nil {
		t.Fatal(err)
	}
	if msg, pid := ns.Next(t, 10*time.Second); msg != "READY=1\nSTATUS=serving 2 routes" || pid != int32(os.Getpid()) {
		t.Fatalf("got %q from pid %d", msg, pid)
	}
	if err := Stopping(); err != nil {
		t.Fatal(err)
	}
	if msg, _ := ns.Next(t, 10*time.Second); msg != "STOPPING=1" {
		t.Fatalf("got %q", msg)
	}
	if os.Getenv("NOTIFY_SOCKET") != ns.Path {
		t.Fatal("NOTIFY_SOCKET was unset; the watchdog needs it")
	}
}

func TestNotifyRefusesMalformedLines(t *testing.T) {
	ns := notifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", ns.Path)
	for _, bad := range [][]string{
		{"READY"},             // no '='
		{"=1"},                // no key
		{"STATUS=a\nREADY=1"}, // a second line smuggled into one
		{"STATUS=nul\x00"},    // NUL
		{},                    // nothing at all
		{"READY=1", "STATUS=x\nMAINPID=1"},
	} {
		if err := Notify(bad...); !errors.Is(err, ErrNotify) {
			t.Errorf("Notify(%q) = %v, want ErrNotify", bad, err)
		}
	}
	// Nothing of the refused messages was sent: the next datagram is this one.
	if err := Notify("STATUS=after"); err != nil {
		t.Fatal(err)
	}
	if msg, _ := ns.Next(t, 10*time.Second); msg != "STATUS=after" {
		t.Fatalf("first datagram %q, want STATUS=after", msg)
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "")
	if err := Ready(); err != nil {
		t.Fatalf("Ready outside systemd: %v", err)
	}
	if iv, err := StartWatchdog(t.Context(), nil); iv != 0 || err != nil {
		t.Fatalf("StartWatchdog outside systemd = %v, %v", iv, err)
	}
}

func TestNotifyUnreachableSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.sock")
	t.Setenv("NOTIFY_SOCKET", path)
	err := Ready()
	if !errors.Is(err, ErrNotify) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Ready to a missing socket = %v, want ErrNotify naming %s", err, path)
	}
}

func TestWatchdogEnvironment(t *testing.T) {
	ns := notifytest.Listen(t)
	cases := []struct {
		name, usec, pid, notify string
		interval                time.Duration
		errText                 string
	}{
		{"enabled", "2000000", "", ns.Path, 2 * time.Second, ""},
		{"for this pid", "2000000", strconv.Itoa(os.Getpid()), ns.Path, 2 * time.Second, ""},
		{"for another pid", "2000000", strconv.Itoa(os.Getpid() + 1), ns.Path, 0, ""},
		{"malformed", "soon", "", ns.Path, 0, "WATCHDOG_USEC"},
		{"zero", "0", "", ns.Path, 0, "positive"},
		{"no notify socket", "2000000", "", "", 0, "NOTIFY_SOCKET is not"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", c.usec)
			t.Setenv("WATCHDOG_PID", c.pid)
			t.Setenv("NOTIFY_SOCKET", c.notify)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			iv, err := StartWatchdog(ctx, nil)
			if c.errText != "" {
				if !errors.Is(err, ErrNotify) || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("err %v, want ErrNotify containing %q", err, c.errText)
				}
				return
			}
			if err != nil || iv != c.interval {
				t.Fatalf("StartWatchdog = %v, %v; want %v", iv, err, c.interval)
			}
		})
	}
}

// TestWatchdogSkipsPingsWhileUnhealthy: the first two health checks fail, so
// the first WATCHDOG=1 may only arrive after the third check.
func TestWatchdogSkipsPingsWhileUnhealthy(t *testing.T) {
	ns := notifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", ns.Path)
	t.Setenv("WATCHDOG_USEC", "20000") // pings every 10 ms
	t.Setenv("WATCHDOG_PID", "")
	var checks atomic.Int32
	check := func() error {
		if checks.Add(1) <= 2 {
			return errors.New("journal stuck")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if iv, err := StartWatchdog(ctx, check); err != nil || iv != 20*time.Millisecond {
		t.Fatalf("StartWatchdog = %v, %v", iv, err)
	}
	msg, pid := ns.Next(t, 10*time.Second)
	if msg != "WATCHDOG=1" || pid != int32(os.Getpid()) {
		t.Fatalf("got %q from %d", msg, pid)
	}
	if n := checks.Load(); n < 3 {
		t.Fatalf("a ping arrived after %d checks; the first two failed", n)
	}
}

// TestSocketActivatedDaemon runs a daemon the way systemd would: its socket
// is bound by systemd-socket-activate, which starts it on the first
// connection with LISTEN_FDS/LISTEN_FDNAMES, and NOTIFY_SOCKET and
// WATCHDOG_USEC point at the test. The test checks READY=1 and then
// WATCHDOG=1 arrive from the daemon's own pid (what NotifyAccess=main
// accepts), and that the daemon serves the connection that woke it.
func TestSocketActivatedDaemon(t *testing.T) {
	activate := needTool(t, "systemd-socket-activate")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := notifytest.Listen(t)
	sock := filepath.Join(t.TempDir(), "mcp.sock")
	cmd := exec.Command(activate,
		"--listen="+sock, "--fdname="+FDMCP,
		"--setenv="+childEnv+"=daemon",
		"--setenv=NOTIFY_SOCKET="+ns.Path,
		"--setenv=WATCHDOG_USEC=100000",
		exe)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})

	// systemd-socket-activate says on stderr when the socket is bound.
	listening := make(chan error, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Listening on "+sock) {
				listening <- nil
			}
		}
		listening <- errors.New("stderr closed before the socket was bound")
	}()
	select {
	case err := <-listening:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("systemd-socket-activate did not bind the socket within 10 s")
	}

	conn, err := net.Dial("unix", sock) // wakes the daemon
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// systemd-socket-activate execs the daemon in place: same pid.
	daemonPid := int32(cmd.Process.Pid)
	msg, pid := ns.Next(t, 20*time.Second)
	if msg != "READY=1\nSTATUS=test daemon serving" || pid != daemonPid {
		t.Fatalf("first notification %q from pid %d, want READY=1 from %d", msg, pid, daemonPid)
	}
	for i := 0; i < 2; i++ {
		msg, pid = ns.Next(t, 20*time.Second)
		if msg != "WATCHDOG=1" || pid != daemonPid {
			t.Fatalf("notification %q from pid %d, want WATCHDOG=1 from %d", msg, pid, daemonPid)
		}
	}

	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "hello on mcp\n" {
		t.Fatalf("daemon greeting %q, %v", line, err)
	}
}
