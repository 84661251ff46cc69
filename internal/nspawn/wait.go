package nspawn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitInotify blocks until done reports true or limit has passed. done is
// checked once the inotify watch on watch (with mask) is in place, so a
// change made before the watch is not missed, and again after each batch of
// events. retry, when non-zero, also ends a wait that no event ends (a
// socket bound but not listening yet), doubling up to 64 times itself.
func waitInotifyRetry(watch string, mask uint32, limit, retry time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify_init1: %w", err)
	}
	// A non-blocking fd in an *os.File goes through the runtime poller, so
	// Read honours SetReadDeadline.
	events := os.NewFile(uintptr(fd), "inotify")
	defer events.Close()
	if _, err := unix.InotifyAddWatch(fd, watch, mask); err != nil {
		return fmt.Errorf("inotify_add_watch %s: %w", watch, err)
	}
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	backoff := retry
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return fmt.Errorf("not within %v", limit)
		}
		wake := deadline
		if retry > 0 {
			if t := now.Add(backoff); t.Before(wake) {
				wake = t
			}
			backoff = min(2*backoff, 64*retry)
		}
		if err := events.SetReadDeadline(wake); err != nil {
			return err
		}
		// Which event it was does not matter: done is asked again.
		if _, err := events.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("reading inotify events of %s: %w", watch, err)
		}
	}
}

func waitInotify(watch string, mask uint32, limit time.Duration, done func() (bool, error)) error {
	return waitInotifyRetry(watch, mask, limit, 0, done)
}

// waitSocket blocks until path is a Unix socket that accepts a connection.
// Its directory must exist. A socket that refuses (bound, not yet
// listening) is tried again after a backoff from 1 ms, since no
// file-system event marks listen(2).
func waitSocket(path string, limit time.Duration) error {
	mask := uint32(unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE)
	var last error
	err := waitInotifyRetry(filepath.Dir(path), mask, limit, time.Millisecond, func() (bool, error) {
		fi, err := os.Lstat(path)
		if err != nil {
			last = err
			return false, nil
		}
		if fi.Mode().Type() != fs.ModeSocket {
			return false, fmt.Errorf("%s is not a socket (%v)", path, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			last = err
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return err
}

// errNoSuchProcess is hostPID's error when no process has the pid.
var errNoSuchProcess = errors.New("no such process")

// hostPID returns the host's pid of the process whose pid is pid in the
// pid namespace of leader (a host pid): the last NSpid field of its status
// is pid and its pid namespace is leader's.
func hostPID(leader, pid int) (int, error) {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(leader) + "/ns/pid")
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(pid)
	for _, e := range entries {
		hp, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		for _, line := range strings.Split(string(status), "\n") {
			rest, ok := strings.CutPrefix(line, "NSpid:")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) > 1 && f[len(f)-1] == want {
				if n, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && n == ns {
					return hp, nil
				}
			}
			break
		}
	}
	return 0, fmt.Errorf("%w: %d in the container's pid namespace", errNoSuchProcess, pid)
}

// waitExit blocks until the host process pid exits, on a pidfd.
func waitExit(pid int, limit time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(limit)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return fmt.Errorf("process %d still runs after %v", pid, limit)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll on the pidfd of %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}
