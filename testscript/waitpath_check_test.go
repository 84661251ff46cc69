package testscript_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitBound bounds each step of these tests; a step that inotify fails to
// wake runs into it and fails, instead of hanging.
const waitBound = 10 * time.Second

// watched runs waitPath(path, limit, ready) in a goroutine and reports each
// answer of ready on answers, so that a test changes the file system only
// once the watch is in place (ready's first answer comes after it).
func watched(t *testing.T, path string, limit time.Duration, ready func() error) (answers <-chan error, done <-chan error) {
	t.Helper()
	a := make(chan error, 4096)
	d := make(chan error, 1)
	go func() {
		d <- waitPath(path, limit, func() error {
			err := ready()
			select {
			case a <- err:
			default: // a test that stopped listening
			}
			return err
		})
	}()
	return a, d
}

// until reads answers until one satisfies ok.
func until(t *testing.T, answers <-chan error, what string, ok func(error) bool) {
	t.Helper()
	timeout := time.After(waitBound)
	for {
		select {
		case err := <-answers:
			if ok(err) {
				return
			}
		case <-timeout:
			t.Fatalf("no answer %s within %v", what, waitBound)
		}
	}
}

func finished(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitBound):
		t.Fatalf("waitPath did not return within %v", waitBound)
		return nil
	}
}

// A file in directories that do not exist yet, created empty and written
// afterwards (still open when the wait must end): the watch descends from
// the nearest ancestor, and the write alone wakes it.
func TestWaitPathFileDescendsAndSeesTheWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "f")
	answers, done := watched(t, path, waitBound, func() error { return fileNotEmpty(path) })
	until(t, answers, "ENOENT", func(err error) bool { return errors.Is(err, fs.ErrNotExist) })

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	until(t, answers, "is empty", func(err error) bool { return err != nil && strings.HasSuffix(err.Error(), " is empty") })
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := finished(t, done); err != nil {
		t.Fatalf("waitPath: %v", err)
	}
}

// A socket bound but not listening refuses without any later file-system
// event; the bounded connect retry ends the wait once it listens.
func TestWaitPathSocketListeningAfterBind(t *testing.T) {
	path := filepath.Join(shortTempDir(t, "wp"), "s.sock") // a socket: not under a $TMPDIR of any length
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	answers, done := watched(t, path, waitBound, func() error { return socketAccepts(path) })
	until(t, answers, "ECONNREFUSED", func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) })
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	if err := finished(t, done); err != nil {
		t.Fatalf("waitPath: %v", err)
	}
}

// `! waitfor`: the wait ends when the path is removed.
func TestWaitPathGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	answers, done := watched(t, path, waitBound, func() error { return pathGone(path) })
	until(t, answers, "still exists", func(err error) bool { return err != nil && strings.HasSuffix(err.Error(), " still exists") })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := finished(t, done); err != nil {
		t.Fatalf("waitPath: %v", err)
	}
}

// A path ready before the watch is taken: the first check ends the wait.
func TestWaitPathAlreadyReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := waitPath(path, 0, func() error { return fileNotEmpty(path) }); err != nil {
		t.Fatalf("waitPath: %v", err)
	}
}

// The deadline passes first: a *notReadyError with the condition's last
// answer, and a directory is not a file.
func TestWaitPathDeadline(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		want func(error) bool
	}{
		{filepath.Join(dir, "missing"), func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{dir, func(err error) bool { return err != nil && strings.Contains(err.Error(), "is not a regular file") }},
	} {
		err := waitPath(tc.path, 20*time.Millisecond, func() error { return fileNotEmpty(tc.path) })
		var stuck *notReadyError
		if !errors.As(err, &stuck) || !tc.want(stuck.last) {
			t.Errorf("waitPath(%s): %v, want a notReadyError with the condition's answer", tc.path, err)
		}
	}
}
