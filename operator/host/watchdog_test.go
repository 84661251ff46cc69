package host_test

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/operator/cli"
	"golang.org/x/sys/unix"
)

// TestFailedWriteIsUndoneAndServeGoesOn runs serve as its own process with
// NOTIFY_SOCKET and WATCHDOG_USEC set, as its unit does: READY=1, then
// WATCHDOG=1 while the host journal is sound. Then the child's file size
// limit is lowered to one byte (prlimit RLIMIT_FSIZE; Go ignores SIGXFSZ),
// so that the next journal write fails for real with EFBIG: the
// administrative command that caused it fails, and the journal removes what
// it wrote (a failed write has a known outcome), so the host stays healthy
// and the pings go on. Once the limit is lifted the same command succeeds
// without a restart. SIGTERM still stops it cleanly with STOPPING=1.
func TestFailedWriteIsUndoneAndServeGoesOn(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	c := hosttest.StartChild(t, w.Store, "", "WATCHDOG_USEC=100000", "WATCHDOG_PID=")
	if m := c.NextNotify(t, 10*time.Second); m != "WATCHDOG=1" {
		t.Fatalf("after READY=1: %q, want WATCHDOG=1", m)
	}
	pid := c.Cmd.Process.Pid
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	saved := lim
	lim.Cur = 1
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	cmd := &cli.CLI{Stdout: &out, Stderr: &errb}
	if code := cmd.Main([]string{"purse", "fund", "ctl", "5", "--store", w.Store}); code != cli.ExitFailure ||
		!strings.Contains(errb.String(), "file too large") || out.Len() != 0 {
		t.Fatalf("fund with a failing journal: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	c.Stderr.WaitFor(t, "journal: write failed; removed what it wrote before answering", 10*time.Second)
	if m := c.NextNotify(t, 10*time.Second); m != "WATCHDOG=1" {
		t.Fatalf("after the failed write: %q, want WATCHDOG=1 (the journal is sound again)", m)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &saved, nil); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := cmd.Main([]string{"purse", "fund", "ctl", "5", "--store", w.Store}); code != cli.ExitOK {
		t.Fatalf("fund once the limit is lifted: exit %d, stderr %q", code, errb.String())
	}

	c.Cmd.Process.Signal(syscall.SIGTERM)
	for {
		m := c.NextNotify(t, 10*time.Second)
		if m == "STOPPING=1" {
			break
		}
		if m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1 or STOPPING=1", m)
		}
	}
	if ws := c.WaitExit(t); ws.ExitStatus() != 0 {
		t.Fatalf("exit %v after SIGTERM; stderr: %s", ws, c.Stderr.String())
	}
}
