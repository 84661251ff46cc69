package hosttest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/systemd"
)

// MainEnv makes a test binary, re-executed, the steward-operator command
// with the hooks its cmd main passes, instead of the tests (Main).
const MainEnv = "STEWARD_OPERATOR_MAIN"

// Main is the TestMain of a package whose tests run the host as a child
// process (StartChild): re-executed with MainEnv=1 the test binary is the
// steward-operator command; else it runs the tests.
func Main(m *testing.M) {
	if os.Getenv(MainEnv) == "1" {
		c := &cli.CLI{Stdout: os.Stdout, Stderr: os.Stderr,
			Ready: systemd.Ready, Watchdog: systemd.StartWatchdog, Stopping: systemd.Stopping}
		os.Exit(c.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// RunCLI runs the steward-operator command in process with args and
// returns its exit code, standard output and standard error.
func RunCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := (&cli.CLI{Stdout: &out, Stderr: &errb}).Main(args)
	return code, out.String(), errb.String()
}

// SyncBuffer is peertest.SyncBuffer, named here for the tests that read a
// child's stderr.
type SyncBuffer = peertest.SyncBuffer

// Child is a `steward-operator serve` process: the test binary re-executed
// as the command (Main), with a real sd_notify socket.
type Child struct {
	Cmd    *exec.Cmd
	Stderr peertest.SyncBuffer
	done   chan error
	notify *net.UnixConn // NOTIFY_SOCKET, open until the test ends
}

// StartChild runs serve on store with failpoint fp armed ("" for none) and
// env added, and waits for READY=1 on its sd_notify socket. The child is
// killed when the test ends, if it still runs.
func StartChild(t *testing.T, store, fp string, env ...string) *Child {
	t.Helper()
	return StartServe(t, store, fp, nil, env...)
}

// StartServe is StartChild with serve's flags args after --store.
func StartServe(t *testing.T, store, fp string, args []string, env ...string) *Child {
	t.Helper()
	nsPath := filepath.Join(filepath.Dir(store), fmt.Sprintf("notify-%d.sock", time.Now().UnixNano()))
	ns, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c := &Child{Cmd: exec.Command(os.Args[0], append([]string{"serve", "--store", store}, args...)...), done: make(chan error, 1), notify: ns}
	c.Cmd.Env = append(os.Environ(), MainEnv+"=1", "NOTIFY_SOCKET="+nsPath, failpoint.Env+"="+fp)
	c.Cmd.Env = append(c.Cmd.Env, env...)
	c.Cmd.Stderr = &c.Stderr
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.Cmd.Wait() }()
	t.Cleanup(func() {
		if c.Cmd.ProcessState == nil {
			c.Cmd.Process.Kill()
			<-c.done
		}
	})
	for {
		if m := c.NextNotify(t, 30*time.Second); strings.Contains(m, "READY=1") {
			return c
		}
	}
}

// NextNotify waits, at most timeout, for the child's next sd_notify message.
func (c *Child) NextNotify(t *testing.T, timeout time.Duration) string {
	t.Helper()
	c.notify.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	n, err := c.notify.Read(buf)
	if err != nil {
		t.Fatalf("no notification from the child: %v; stderr: %s", err, c.Stderr.String())
	}
	return string(buf[:n])
}

// WaitExit waits for the child to exit and returns its wait status.
func (c *Child) WaitExit(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not exit; stderr: %s", c.Stderr.String())
	}
	return c.Cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// Stop sends SIGTERM and fails unless the child exits 0.
func (c *Child) Stop(t *testing.T) {
	t.Helper()
	c.Cmd.Process.Signal(syscall.SIGTERM)
	if ws := c.WaitExit(t); ws.ExitStatus() != 0 {
		t.Fatalf("child exit %v; stderr: %s", ws, c.Stderr.String())
	}
}
