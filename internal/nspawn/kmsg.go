package nspawn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// KernelLog reads the kernel's log (/dev/kmsg) from the moment
// WatchKernelLog was called.
type KernelLog struct {
	fh *os.File
}

// WatchKernelLog opens /dev/kmsg positioned at its end; it is closed when t
// ends.
func WatchKernelLog(t testing.TB) *KernelLog {
	t.Helper()
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		unavailable(t, "cannot read the kernel log: /dev/kmsg: "+err.Error())
	}
	// Not through the runtime poller: each read(2) returns one record,
	// and EAGAIN says there is no more.
	fh := os.NewFile(uintptr(fd), "/dev/kmsg")
	if _, err := fh.Seek(0, io.SeekEnd); err != nil {
		fh.Close()
		t.Fatalf("seeking to the end of /dev/kmsg: %v", err)
	}
	t.Cleanup(func() { fh.Close() })
	return &KernelLog{fh: fh}
}

// Lines returns the messages logged since the last call (or since
// WatchKernelLog), without their prefix. Records the kernel overwrote
// before they were read are reported as one line saying so.
func (k *KernelLog) Lines() ([]string, error) {
	var lines []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.Read(int(k.fh.Fd()), buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return lines, nil
		case errors.Is(err, syscall.EPIPE):
			lines = append(lines, "nspawn: kernel log records were overwritten before they were read")
			continue
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return lines, fmt.Errorf("reading /dev/kmsg: %w", err)
		}
		rec := string(buf[:n])
		// "PRIO,SEQ,USEC,FLAGS[,...];MESSAGE\n" followed by " KEY=VALUE"
		// continuation lines.
		if _, msg, ok := strings.Cut(rec, ";"); ok {
			msg, _, _ = strings.Cut(msg, "\n")
			lines = append(lines, msg)
		}
	}
}

// WaitFor reads the kernel log until a line for which match is true
// arrives, or until timeout passes, and returns every line read. It waits
// on the log itself (poll(2) for its next record), never by sleeping: the
// kernel's audit records reach the log from its audit thread, after the
// system call they record has returned, so a read made at once may come
// before them.
func (k *KernelLog) WaitFor(match func(string) bool, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	var all []string
	for {
		lines, err := k.Lines()
		all = append(all, lines...)
		if err != nil || slices.ContainsFunc(lines, match) {
			return all, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return all, nil
		}
		fds := []unix.PollFd{{Fd: int32(k.fh.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return all, fmt.Errorf("waiting on /dev/kmsg: %w", err)
		}
	}
}

// SeccompLines picks the seccomp records (audit type=1326, and the
// kernel's note that audit records were dropped) from lines.
func SeccompLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "type=1326") || strings.Contains(l, "seccomp") ||
			strings.Contains(l, "audit: printk limit exceeded") || strings.Contains(l, "audit_lost") {
			out = append(out, l)
		}
	}
	return out
}
