package wire

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Connection caps used when ListenConfig leaves them zero.
const (
	DefaultMaxConns  = 128
	DefaultMaxPerUID = 32
)

// refuseTimeout bounds answering a connection being turned away when
// ListenConfig.RefuseTimeout is 0.
const refuseTimeout = 2 * time.Second

// MaxRefusing bounds the refusals answered at once, each in its own
// goroutine so that a refused peer that is slow to be answered never holds
// up Accept. Past it a refusal is answered at once without reading
// anything from the peer (its read deadline is already past).
const MaxRefusing = 32

// ListenConfig describes one listening socket.
type ListenConfig struct {
	Path      string                              // absolute socket path
	Mode      os.FileMode                         // socket file mode, set at bind time (0: 0600)
	Allow     func(PeerCred) error                // admits a peer by its SO_PEERCRED; required
	MaxConns  int                                 // open connections in total (0: DefaultMaxConns)
	MaxPerUID int                                 // open connections per peer UID (0: DefaultMaxPerUID)
	Refuse    func(c *net.UnixConn, reason error) // answers a refused connection before it is closed; required
	Logger    *slog.Logger                        // where refusals are logged (nil: slog.Default())

	// RefuseTimeout bounds Refuse's reads on one connection (0: 2 s): the
	// listener sets the read deadline to it before Refuse runs, and the
	// write deadline 2 s past it. A socket whose Refuse reads the peer's
	// first request to answer it (the MCP socket) sets it to its
	// first-request deadline.
	RefuseTimeout time.Duration
	// EvictSilent makes a connection past MaxConns or MaxPerUID take the
	// slot of the oldest admitted connection (of that UID, for
	// MaxPerUID) that its server has not yet marked Proven, closing that
	// one, instead of being refused. It is for sockets whose every peer
	// is one account and whose next connection may be the kill switch
	// (the operator's admin socket): connections that never speak then
	// cannot keep it out. A cap held only by proven connections still
	// refuses.
	EvictSilent bool
}

// Listener accepts connections on a Unix socket and admits only those whose
// peer credentials pass Allow and fit under the caps. Every other connection
// is answered through Refuse, logged, and closed: never a silent close.
type Listener struct {
	ln     *net.UnixListener
	cfg    ListenConfig
	log    *slog.Logger
	unlink *os.FileInfo // the socket file Listen created, removed by Close if still ours

	mu       sync.Mutex
	total    int
	perUID   map[uint32]int
	unproven []*PeerConn // admitted, not yet Proven, oldest first (EvictSilent only)

	refusing chan struct{} // one token per refusal being answered
}

func (cfg *ListenConfig) fill() error {
	if cfg.Allow == nil {
		return fmt.Errorf("wire: listen %s: ListenConfig.Allow is nil; every socket must check its peer", cfg.Path)
	}
	if cfg.Refuse == nil {
		return fmt.Errorf("wire: listen %s: ListenConfig.Refuse is nil; a refused peer must be told why", cfg.Path)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxPerUID == 0 {
		cfg.MaxPerUID = DefaultMaxPerUID
	}
	if cfg.MaxConns < 0 || cfg.MaxPerUID < 0 {
		return fmt.Errorf("wire: listen %s: negative connection cap", cfg.Path)
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o600
	}
	if cfg.RefuseTimeout == 0 {
		cfg.RefuseTimeout = refuseTimeout
	}
	return nil
}

// NewListener wraps a listener made elsewhere, e.g. passed in by systemd
// socket activation (whose unit sets the socket's mode). cfg.Path is used
// only in messages. It panics if cfg.Allow or cfg.Refuse is nil.
func NewListener(l *net.UnixListener, cfg ListenConfig) *Listener {
	if err := cfg.fill(); err != nil {
		panic(err)
	}
	return newListener(l, cfg)
}

func newListener(l *net.UnixListener, cfg ListenConfig) *Listener {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Listener{ln: l, cfg: cfg, log: log, perUID: make(map[uint32]int), refusing: make(chan struct{}, MaxRefusing)}
}

// Listen creates the socket at cfg.Path with cfg.Mode from the start: it
// binds in a fresh 0700 directory beside the path, sets the mode there,
// listens, and only then links the socket to its name, so no one can ever
// connect to it with a wider mode. An existing file at the path is removed
// only if it is a stale socket (nobody listening) owned by this user.
func Listen(cfg ListenConfig) (*Listener, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cfg.Path) {
		return nil, fmt.Errorf("wire: listen %s: not an absolute path", cfg.Path)
	}
	if err := removeStale(cfg.Path); err != nil {
		return nil, err
	}
	ln, fi, err := bindPrivate(cfg.Path, cfg.Mode)
	if err != nil {
		return nil, fmt.Errorf("wire: listen %s: %w", cfg.Path, err)
	}
	l := newListener(ln, cfg)
	l.unlink = &fi
	return l, nil
}

// removeStale removes a socket left by a dead listener of ours.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wire: listen %s: %w", path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("wire: listen %s: a %v that is not a socket is in the way", path, fi.Mode().Type())
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != uint32(os.Geteuid()) {
		return fmt.Errorf("wire: listen %s: a socket owned by uid %d is in the way", path, uid)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("wire: listen %s: another process is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("wire: listen %s: probing the existing socket: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("wire: listen %s: removing stale socket: %w", path, err)
	}
	return nil
}

// bindPrivate does socket, bind (in a private directory), chmod, listen, then
// links the socket into place without replacing anything.
func bindPrivate(path string, mode os.FileMode) (ln *net.UnixListener, fi os.FileInfo, err error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".bind-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	if len(tmp) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, nil, fmt.Errorf("private bind path %s is too long for a Unix socket address", tmp)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // net.FileListener holds its own duplicate
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: tmp}); err != nil {
		return nil, nil, fmt.Errorf("bind: %w", err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // before listen, inside the 0700 directory
		return nil, nil, fmt.Errorf("chmod: %w", err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		return nil, nil, fmt.Errorf("link into place: %w", err)
	}
	if fi, err = os.Lstat(path); err != nil {
		os.Remove(path)
		return nil, nil, err
	}
	l, err := net.FileListener(f)
	if err != nil {
		os.Remove(path)
		return nil, nil, fmt.Errorf("file listener: %w", err)
	}
	return l.(*net.UnixListener), fi, nil
}

// Path returns the socket path given in the config.
func (l *Listener) Path() string { return l.cfg.Path }

// Accept returns the next admitted connection. A connection whose peer is
// not allowed, or that would pass MaxConns or MaxPerUID, is answered with
// Refuse (the reason wraps ErrWrongPeer or ErrTooManyConns), logged, and
// closed, and Accept waits for the next one.
func (l *Listener) Accept() (*PeerConn, error) {
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			return nil, fmt.Errorf("wire: accept on %s: %w", l.cfg.Path, err)
		}
		cred, err := PeerCredOf(c)
		if err != nil {
			l.refuse(c, cred, err)
			continue
		}
		if err := l.cfg.Allow(cred); err != nil {
			if !errors.Is(err, ErrWrongPeer) {
				err = fmt.Errorf("%w: %w", ErrWrongPeer, err)
			}
			l.refuse(c, cred, fmt.Errorf("uid %d gid %d pid %d is not allowed on %s: %w", cred.UID, cred.GID, cred.PID, l.cfg.Path, err))
			continue
		}
		pc := &PeerConn{UnixConn: c, Cred: cred, l: l}
		if err := l.take(pc); err != nil {
			l.refuse(c, cred, err)
			continue
		}
		return pc, nil
	}
}

// take reserves a connection slot for pc, evicting a silent connection
// when the config says so and the cap is full.
func (l *Listener) take(pc *PeerConn) error {
	uid := pc.Cred.UID
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perUID[uid] >= l.cfg.MaxPerUID && l.cfg.EvictSilent {
		l.evictLocked(func(o *PeerConn) bool { return o.Cred.UID == uid })
	}
	if l.total >= l.cfg.MaxConns && l.cfg.EvictSilent {
		l.evictLocked(func(*PeerConn) bool { return true })
	}
	if l.total >= l.cfg.MaxConns {
		return fmt.Errorf("%w: %d connections open on %s, the cap is MaxConns %d", ErrTooManyConns, l.total, l.cfg.Path, l.cfg.MaxConns)
	}
	if n := l.perUID[uid]; n >= l.cfg.MaxPerUID {
		return fmt.Errorf("%w: uid %d has %d connections open on %s, the cap is MaxPerUID %d", ErrTooManyConns, uid, n, l.cfg.Path, l.cfg.MaxPerUID)
	}
	l.total++
	l.perUID[uid]++
	if l.cfg.EvictSilent {
		l.unproven = append(l.unproven, pc)
	}
	return nil
}

// evictLocked closes the oldest unproven connection that match accepts and
// releases its slot now, so that the connection being admitted can have it.
func (l *Listener) evictLocked(match func(*PeerConn) bool) {
	for i, o := range l.unproven {
		if !match(o) {
			continue
		}
		if !o.released.CompareAndSwap(false, true) {
			continue // its Close is releasing it, waiting for l.mu
		}
		l.unproven = slices.Delete(l.unproven, i, i+1)
		l.log.Warn("wire: evicted a connection that has not proven itself to admit a new one", "path", l.cfg.Path, "uid", o.Cred.UID, "pid", o.Cred.PID)
		o.UnixConn.Close()
		l.releaseLocked(o.Cred.UID)
		return
	}
}

func (l *Listener) release(pc *PeerConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropUnprovenLocked(pc)
	l.releaseLocked(pc.Cred.UID)
}

func (l *Listener) dropUnprovenLocked(pc *PeerConn) {
	if i := slices.Index(l.unproven, pc); i >= 0 {
		l.unproven = slices.Delete(l.unproven, i, i+1)
	}
}

func (l *Listener) releaseLocked(uid uint32) {
	l.total--
	if l.perUID[uid]--; l.perUID[uid] == 0 {
		delete(l.perUID, uid)
	}
}

// refuse answers c through Refuse in a goroutine of its own, bounded by
// RefuseTimeout. Past MaxRefusing refusals at once it answers here and at
// once: the read deadline is already past, so a Refuse that would read the
// peer's request answers without it, and the write gets refuseTimeout.
func (l *Listener) refuse(c *net.UnixConn, cred PeerCred, reason error) {
	l.log.Warn("wire: refused connection", "path", l.cfg.Path, "uid", cred.UID, "gid", cred.GID, "pid", cred.PID, "reason", reason.Error())
	select {
	case l.refusing <- struct{}{}:
		// Reading may take all of RefuseTimeout; the answer still gets
		// its own refuseTimeout to be written.
		c.SetReadDeadline(time.Now().Add(l.cfg.RefuseTimeout))
		c.SetWriteDeadline(time.Now().Add(l.cfg.RefuseTimeout + refuseTimeout))
		go func() {
			defer func() { <-l.refusing }()
			l.cfg.Refuse(c, reason)
			c.Close()
		}()
	default:
		c.SetReadDeadline(time.Now())
		c.SetWriteDeadline(time.Now().Add(refuseTimeout))
		l.cfg.Refuse(c, reason)
		c.Close()
	}
}

// Close stops listening and removes the socket file if Listen created it and
// it is still the same file.
func (l *Listener) Close() error {
	err := l.ln.Close()
	if l.unlink != nil {
		if fi, serr := os.Lstat(l.cfg.Path); serr == nil && os.SameFile(fi, *l.unlink) {
			os.Remove(l.cfg.Path)
		}
	}
	return err
}

// PeerConn is an admitted connection with its peer's credentials. Closing it
// releases its connection slot, exactly once.
type PeerConn struct {
	*net.UnixConn
	Cred PeerCred

	l        *Listener
	released atomic.Bool // the slot is released, by Close or by eviction
}

// Close closes the connection and releases its slot.
func (c *PeerConn) Close() error {
	err := c.UnixConn.Close()
	if c.released.CompareAndSwap(false, true) {
		c.l.release(c)
	}
	return err
}

// Proven tells the listener that the peer has proven itself (on a frame
// socket: completed the handshake), so that ListenConfig.EvictSilent no
// longer evicts this connection. It is a no-op on other listeners.
func (c *PeerConn) Proven() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.dropUnprovenLocked(c)
}

// RefuseFrame returns a ListenConfig.Refuse for frame sockets: it sends a
// refused{reason} frame signed by key, with seq 0 and an empty channel, the
// frame ClientHandshake reports as ErrRefused.
func RefuseFrame(key *SigningKey) func(*net.UnixConn, error) {
	return func(c *net.UnixConn, reason error) {
		if err := writeRefusal(c, key, reason); err != nil {
			slog.Debug("wire: writing refusal frame", "err", err)
		}
	}
}
