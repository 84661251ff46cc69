package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

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
// being served with unbounded memory. Only the host's account is served
// (peerCheck): any other peer that reaches the socket is answered with a
// 403 refusal and closed before it is handed to the HTTP server, so that it
// can hold no slot past the accept and no call of the host waits behind it.
type limitListener struct {
	*net.UnixListener
	slots chan struct{}
	peers peerCheck
	log   *slog.Logger
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	for {
		c, err := l.UnixListener.AcceptUnix()
		if err != nil {
			<-l.slots
			return nil, err
		}
		if err := l.peers.admit(c); err != nil {
			l.log.Warn("refused a connection", "socket", l.peers.socket, "reason", err)
			refusePeer(c, err)
			continue
		}
		if testHookAccepted != nil {
			testHookAccepted()
		}
		return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
	}
}

// testHookAccepted, when set by a test, is called when a connection is
// admitted and holds a slot.
var testHookAccepted func()

// peerCheck admits the host's account by SO_PEERCRED: the appliance's own
// uid (dev and tests run the host as the same account), the uids in
// Config.PeerUIDs, and a peer whose group is the socket's (the socket
// directory is setgid to the host's group in an installation, so the host's
// account, whose primary group that is, passes).
type peerCheck struct {
	socket string
	self   uint32
	uids   []uint32
	gid    uint32 // the socket's group
}

func newPeerCheck(socket string, uids []uint32) (peerCheck, error) {
	fi, err := os.Lstat(socket)
	if err != nil {
		return peerCheck{}, fmt.Errorf("socket %s: %w", socket, err)
	}
	return peerCheck{socket: socket, self: uint32(os.Geteuid()), uids: uids, gid: fi.Sys().(*syscall.Stat_t).Gid}, nil
}

func (p peerCheck) admit(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("reading the peer's credentials: %w", cerr)
	}
	if cred.Uid == p.self || cred.Gid == p.gid || slices.Contains(p.uids, cred.Uid) {
		return nil
	}
	return fmt.Errorf("peer uid %d gid %d is not the host's account (uid %d, group %d, or %v)", cred.Uid, cred.Gid, p.self, p.gid, p.uids)
}

// refuseTimeout bounds writing a refusal to a peer that is not admitted.
const refuseTimeout = 2 * time.Second

// refusePeer answers a peer that is not admitted with a whole HTTP response
// (403, the appliance's error object, Connection: close), then closes it.
// The answer is written at once, without reading the request: the peer's
// bytes are never parsed.
func refusePeer(c *net.UnixConn, reason error) {
	body := (&refusal{status: http.StatusForbidden, code: codeRefused, message: reason.Error()}).body()
	c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Close()
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
