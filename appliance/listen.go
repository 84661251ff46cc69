package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketMode is the mode the socket is created with: the owner and its
// group (the host's account) may connect, nobody else.
const socketMode = 0o660

// listenUnix binds a Unix socket at path with mode socketMode from the
// start: the bind runs under umask 0117, never followed by a chmod. The
// umask is set on a thread of its own (unshare CLONE_FS), which is never
// handed back to the Go scheduler, so no other goroutine's files are
// created under it. Where unshare is not allowed, the process umask is
// switched around the bind instead, under a lock.
func listenUnix(path string, log *slog.Logger) (*net.UnixListener, error) {
	if err := clearStaleSocket(path, log); err != nil {
		return nil, err
	}
	type result struct {
		ln  *net.UnixListener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread's fs context is its own now, and
		// the thread exits with this goroutine.
		if err := unshareFS(); err != nil {
			log.Warn("unshare(CLONE_FS) refused; setting the process umask around the bind", "err", err)
			ln, err := bindWithProcessUmask(path)
			ch <- result{ln, err}
			return
		}
		unix.Umask(0o777 &^ socketMode)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, r.err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		r.ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if fi.Mode().Perm() != socketMode || fi.Mode().Type() != fs.ModeSocket {
		r.ln.Close()
		return nil, fmt.Errorf("listen on %s: socket created with mode %v, want %#o", path, fi.Mode(), socketMode)
	}
	return r.ln, nil
}

// unshareFS gives the calling thread its own umask; a variable so that a
// test can take the fallback.
var unshareFS = func() error { return unix.Unshare(unix.CLONE_FS) }

var processUmask sync.Mutex

func bindWithProcessUmask(path string) (*net.UnixListener, error) {
	processUmask.Lock()
	defer processUmask.Unlock()
	old := unix.Umask(0o777 &^ socketMode)
	defer unix.Umask(old)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}

// clearStaleSocket removes a socket left at path by a process that is
// gone (connecting to it is refused), saying so in the log. A live socket
// or anything that is not a socket is left alone and refused.
func clearStaleSocket(path string, log *slog.Logger) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket %s: exists and is not a socket (%v)", path, fi.Mode())
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("socket %s: another process is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("socket %s: exists and cannot be probed: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("socket %s: removing the stale socket: %w", path, err)
	}
	log.Warn("removed a stale socket nobody listens on", "socket", path)
	return nil
}

// limitListener caps the connections open at once: Accept waits while the
// cap is reached, so extra clients wait in the listen backlog instead of
// being served with unbounded memory.
type limitListener struct {
	*net.UnixListener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.UnixListener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// prepareStateDir creates dir with mode 0700, or checks that an existing
// one is a real directory of this account that nobody else can enter.
func prepareStateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s: not a directory (%v)", dir, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("state directory %s: mode %#o lets others in; want 0700", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("state directory %s: owned by uid %d, not this process's %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}
