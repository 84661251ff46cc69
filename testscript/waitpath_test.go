package testscript_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchMask is every change of a directory entry that can make a waited-for
// path appear, fill, become reachable, or go: an entry created, linked or
// renamed in or out, or removed; a file written (IN_MODIFY while the writer
// still holds it, IN_CLOSE_WRITE when it is done) or re-permissioned; and the
// watched directory itself removed or renamed, after which the watch is
// moved to the nearest directory that still exists.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// Bounds of the retry of a connect that no file-system event will end (see
// waitPath).
const (
	connectRetryFirst = time.Millisecond
	connectRetryMax   = 64 * time.Millisecond
)

// notReadyError is waitPath's error when the deadline passed first; last is
// the condition's last answer.
type notReadyError struct{ last error }

func (e *notReadyError) Error() string { return "not ready: " + e.last.Error() }

// waitPath waits until ready returns nil or limit has passed, whichever comes
// first. ready is a condition on path alone: it is checked once the watch is
// in place (so a path made before the watch is not missed), then again after
// each batch of inotify events from the directory that holds path. If that
// directory does not exist yet, the nearest existing ancestor is watched and
// the watch descends as directories appear.
//
// One condition can turn true without any file-system event: a socket whose
// file exists but is not listening yet. steward-appliance makes its socket
// with net.ListenUnix, which binds (the file appears, inotify fires) and only
// then listens, so for an instant a connect is refused (ECONNREFUSED). (A
// socket made by wire.Listen has no such instant: it is linked into place
// after listen, but the appliance is the socket journeys wait for.) A socket
// left by a killed daemon refuses too, until its successor removes it, which
// is an event. A full accept backlog (EAGAIN) likewise ends without one. For
// those two errors alone, the wait also ends after a backoff of
// connectRetryFirst doubling up to connectRetryMax, still within the
// deadline, and the condition is checked again.
//
// When the deadline passes first the error is a *notReadyError; any other
// error is inotify failing.
func waitPath(path string, limit time.Duration, ready func() error) error {
	deadline := time.Now().Add(limit)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("waiting for %s: inotify_init1: %w", path, err)
	}
	// A non-blocking fd in an *os.File goes through the runtime poller, so a
	// Read blocks the goroutine only and honours SetReadDeadline.
	events := os.NewFile(uintptr(fd), "inotify")
	defer events.Close()
	w := dirWatch{fd: fd, wd: -1}
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	var backoff time.Duration
	for {
		if err := w.follow(filepath.Dir(path)); err != nil {
			return fmt.Errorf("waiting for %s: %w", path, err)
		}
		last := ready()
		if last == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &notReadyError{last}
		}
		wake := deadline
		if errors.Is(last, syscall.ECONNREFUSED) || errors.Is(last, syscall.EAGAIN) {
			backoff = min(max(2*backoff, connectRetryFirst), connectRetryMax)
			if t := time.Now().Add(backoff); t.Before(wake) {
				wake = t
			}
		} else {
			backoff = 0
		}
		if err := events.SetReadDeadline(wake); err != nil {
			return fmt.Errorf("waiting for %s: %w", path, err)
		}
		// The events themselves are not needed: whatever changed, the
		// condition is checked again. Events left unread wake the next Read.
		if _, err := events.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("waiting for %s: reading inotify events: %w", path, err)
		}
	}
}

// dirWatch is the one directory an inotify instance watches.
type dirWatch struct {
	fd  int
	wd  int         // watch descriptor, -1 before the first
	dir os.FileInfo // the directory watched, nil before the first
}

// follow moves the watch to target, or to its nearest ancestor that exists,
// unless it is already there. After each move it looks again, since a
// deeper directory may have been made before the watch was in place.
func (w *dirWatch) follow(target string) error {
	for {
		dir, fi, err := nearestDir(target)
		if err != nil {
			return err
		}
		if w.dir != nil && os.SameFile(fi, w.dir) {
			return nil
		}
		wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue // gone between the stat and the watch: look again
		}
		if err != nil {
			return fmt.Errorf("inotify_add_watch %s: %w", dir, err)
		}
		if w.wd >= 0 && w.wd != wd {
			// EINVAL when the kernel already dropped it (directory removed).
			unix.InotifyRmWatch(w.fd, uint32(w.wd))
		}
		w.wd, w.dir = wd, fi
	}
}

// nearestDir returns target, or its nearest ancestor, that is a directory.
func nearestDir(target string) (string, os.FileInfo, error) {
	for dir := target; ; {
		fi, err := os.Stat(dir)
		if err == nil && fi.IsDir() {
			return dir, fi, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil, fmt.Errorf("no directory exists above %s", target)
		}
		dir = parent
	}
}

// socketAccepts is nil when path is a Unix socket that accepts a connection.
func socketAccepts(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// fileNotEmpty is nil when path is a regular file with at least one byte.
// The link itself is looked at: a symlink's target may be in a directory
// waitPath does not watch.
func fileNotEmpty(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if fi.Size() == 0 {
		return fmt.Errorf("%s is empty", path)
	}
	return nil
}

// pathGone is nil when path cannot be looked up (not even as a dangling
// symlink).
func pathGone(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s still exists", path)
	}
	return nil
}
