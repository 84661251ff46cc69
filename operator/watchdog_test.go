package operator

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWatchdogStopsWhenTheJournalFails runs serve as its own process with
// NOTIFY_SOCKET and WATCHDOG_USEC set, as its unit does: READY=1, then
// WATCHDOG=1 while the host journal is sound. Then the child's file size
// limit is lowered to one byte (prlimit RLIMIT_FSIZE; Go ignores SIGXFSZ),
// so that the next journal write fails for real with EFBIG: the
// administrative command that caused it fails, the journal refuses every
// later append, and the health check says so, which stops the pings (so
// systemd restarts the host). SIGTERM still stops it cleanly with
// STOPPING=1.
func TestWatchdogStopsWhenTheJournalFails(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 10, price: 1})
	c := startChild(t, w.store, "", "WATCHDOG_USEC=100000", "WATCHDOG_PID=")
	if m := c.nextNotify(t, 10*time.Second); m != "WATCHDOG=1" {
		t.Fatalf("after READY=1: %q, want WATCHDOG=1", m)
	}
	pid := c.cmd.Process.Pid
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 1
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	cli := &CLI{Stdout: &out, Stderr: &errb}
	if code := cli.Main([]string{"purse", "fund", "ctl", "5", "--store", w.store}); code != ExitFailure ||
		!strings.Contains(errb.String(), "file too large") || out.Len() != 0 {
		t.Fatalf("fund with a failing journal: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	c.stderr.waitFor(t, "watchdog: health check failed, not pinging", 10*time.Second)
	if s := c.stderr.String(); !strings.Contains(s, "host journal "+w.store+"/journal failed: ") || !strings.Contains(s, "file too large") {
		t.Fatalf("the health check does not name the failed journal:\n%s", s)
	}
	errb.Reset()
	if code := cli.Main([]string{"purse", "freeze", "ctl", "--store", w.store}); code != ExitFailure || !strings.Contains(errb.String(), "file too large") {
		t.Fatalf("a later change: exit %d, stderr %q, want the journal's failure again", code, errb.String())
	}

	c.cmd.Process.Signal(syscall.SIGTERM)
	for {
		m := c.nextNotify(t, 10*time.Second)
		if m == "STOPPING=1" {
			break
		}
		if m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1 or STOPPING=1", m)
		}
	}
	if ws := c.waitExit(t); ws.ExitStatus() != 0 {
		t.Fatalf("exit %v after SIGTERM; stderr: %s", ws, c.stderr.String())
	}
}
