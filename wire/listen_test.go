package wire

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a log sink shared by the accept goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// frameServer listens on path and runs a server handshake on every admitted
// connection, sending each resulting channel (or handshake error) to the test.
type frameServer struct {
	l        *Listener
	key      *SigningKey
	admitted chan *PeerConn
	channels chan *Channel
	log      *syncBuffer
}

func startFrameServer(t *testing.T, cfg ListenConfig, peerKeys *Keyring) *frameServer {
	t.Helper()
	s := &frameServer{key: mustKey(t), admitted: make(chan *PeerConn, 64), channels: make(chan *Channel, 64), log: &syncBuffer{}}
	cfg.Refuse = RefuseFrame(s.key)
	cfg.Logger = slog.New(slog.NewTextHandler(s.log, nil))
	l, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.l = l
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.admitted <- c
			go func() {
				ch, err := ServerHandshake(c, ChannelConfig{Key: s.key, Role: "host", PeerKeys: peerKeys,
					Path: cfg.Path, Purpose: "test", SendLimit: MaxReplyFrame, RecvLimit: MaxRequestFrame})
				if err == nil {
					c.Proven()
					s.channels <- ch
				}
			}()
		}
	}()
	return s
}

func dialHandshake(t *testing.T, path string, key *SigningKey, serverKey *PublicKey) (*Channel, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	euid := uint32(os.Geteuid())
	conn, err := Dial(ctx, path, euid, euid)
	if err != nil {
		t.Fatal(err)
	}
	return ClientHandshake(conn, ChannelConfig{Key: key, Role: "client", PeerKeys: NewKeyring(serverKey),
		Path: path, Purpose: "test", SendLimit: MaxRequestFrame, RecvLimit: MaxReplyFrame})
}

func allowAll(PeerCred) error { return nil }

func TestListenDialHandshake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.sock")
	ck := mustKey(t)
	s := startFrameServer(t, ListenConfig{Path: path, Mode: 0o660, Allow: allowAll}, NewKeyring(ck.Public()))
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode() != os.ModeSocket|0o660 {
		t.Fatalf("socket mode %v, want 0660 (%v)", fi.Mode(), err)
	}
	// The private bind directory is gone: the socket is the only entry.
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("directory holds %v", entries)
	}
	ch, err := dialHandshake(t, path, ck, s.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	sc := <-s.channels
	pc := (<-s.admitted)
	if pc.Cred.UID != uint32(os.Geteuid()) || pc.Cred.PID != int32(os.Getpid()) {
		t.Fatalf("SO_PEERCRED %+v", pc.Cred)
	}
	if err := ch.Send("ping", "1", "hello"); err != nil {
		t.Fatal(err)
	}
	e, err := sc.Recv()
	if err != nil || e.T != "ping" || !bytes.Equal(sc.ID(), ch.ID()) {
		t.Fatalf("over the listener: %+v %v", e, err)
	}
	s.l.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close left the socket file: %v", err)
	}
}

func TestListenModeIgnoresUmask(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct {
		umask int
		mode  os.FileMode
	}{{0o000, 0o600}, {0o077, 0o666}, {0o022, 0o660}} {
		old := syscall.Umask(c.umask)
		path := filepath.Join(dir, fmt.Sprintf("%d.sock", i))
		l, err := Listen(ListenConfig{Path: path, Mode: c.mode, Allow: allowAll, Refuse: RefuseFrame(mustKey(t))})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(path)
		l.Close()
		if fi.Mode().Perm() != c.mode {
			t.Fatalf("umask %03o mode %04o: socket is %04o", c.umask, c.mode, fi.Mode().Perm())
		}
	}
}

func TestListenStaleSocket(t *testing.T) {
	dir := t.TempDir()
	key := mustKey(t)
	cfg := func(path string) ListenConfig {
		return ListenConfig{Path: path, Allow: allowAll, Refuse: RefuseFrame(key)}
	}
	// A socket left by a dead listener of ours is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	l, err := Listen(cfg(stale))
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	// A live one is not.
	if _, err := Listen(cfg(stale)); err == nil || !strings.Contains(err.Error(), "another process is listening on it") {
		t.Fatalf("live socket: %v", err)
	}
	l.Close()
	// Nor is anything that is not a socket.
	file := filepath.Join(dir, "file.sock")
	os.WriteFile(file, []byte("keep me"), 0o600)
	if _, err := Listen(cfg(file)); err == nil || !strings.Contains(err.Error(), "not a socket is in the way") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("Listen removed a regular file")
	}
	// Allow and Refuse are required.
	if _, err := Listen(ListenConfig{Path: filepath.Join(dir, "x.sock"), Refuse: RefuseFrame(key)}); err == nil {
		t.Fatal("Listen without Allow")
	}
	if _, err := Listen(ListenConfig{Path: filepath.Join(dir, "x.sock"), Allow: allowAll}); err == nil {
		t.Fatal("Listen without Refuse")
	}
}

func TestListenSocketOwnedByOther(t *testing.T) {
	uid, gid := testAccount(t)
	path := filepath.Join(t.TempDir(), "theirs.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	os.Chown(path, int(uid), int(gid))
	_, err = Listen(ListenConfig{Path: path, Allow: allowAll, Refuse: RefuseFrame(mustKey(t))})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a socket owned by uid %d is in the way", uid)) {
		t.Fatalf("socket of another account: %v", err)
	}
}

func TestConnectionCaps(t *testing.T) {
	ck := mustKey(t)
	t.Run("MaxConns", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "caps.sock")
		s := startFrameServer(t, ListenConfig{Path: path, Allow: allowAll, MaxConns: 2, MaxPerUID: 10}, NewKeyring(ck.Public()))
		var open []*Channel
		for range 2 {
			ch, err := dialHandshake(t, path, ck, s.key.Public())
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, ch)
		}
		_, err := dialHandshake(t, path, ck, s.key.Public())
		want := fmt.Sprintf("wire: too many connections: 2 connections open on %s, the cap is MaxConns 2", path)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("connection past the cap: %v, want ErrRefused saying %q", err, want)
		}
		if !strings.Contains(s.log.String(), "refused connection") || !strings.Contains(s.log.String(), "MaxConns 2") {
			t.Fatalf("refusal not logged: %s", s.log)
		}
		// Closing one (on the server's side, as a server does when its
		// channel ends) releases its slot, once.
		open[0].Close()
		closeAndCheckRelease(t, s, 1)
		ch, err := dialHandshake(t, path, ck, s.key.Public())
		if err != nil {
			t.Fatalf("after a slot was released: %v", err)
		}
		ch.Close()
		open[1].Close()
	})
	t.Run("MaxPerUID", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "peruid.sock")
		s := startFrameServer(t, ListenConfig{Path: path, Allow: allowAll, MaxConns: 10, MaxPerUID: 1}, NewKeyring(ck.Public()))
		first, err := dialHandshake(t, path, ck, s.key.Public())
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		_, err = dialHandshake(t, path, ck, s.key.Public())
		want := fmt.Sprintf("wire: too many connections: uid %d has 1 connections open on %s, the cap is MaxPerUID 1", os.Geteuid(), path)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("second connection of one uid: %v, want ErrRefused saying %q", err, want)
		}
	})
}

// closeAndCheckRelease closes the server side of the first admitted
// connection twice (the slot must be released once) and checks the count.
func closeAndCheckRelease(t *testing.T, s *frameServer, wantOpen int) {
	t.Helper()
	pc := <-s.admitted
	pc.Close()
	pc.Close()
	s.l.mu.Lock()
	total := s.l.total
	s.l.mu.Unlock()
	if total != wantOpen {
		t.Fatalf("%d connections counted open, want %d", total, wantOpen)
	}
}

// runChildLine runs a child and returns its one line of output.
func runChildLine(t *testing.T, role string, uid, gid uint32, env ...string) string {
	t.Helper()
	cmd := childCommand(t, role, uid, gid, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v (output %q)", role, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestPeerWithWrongUIDRefused(t *testing.T) {
	uid, gid := testAccount(t)
	path := filepath.Join(publicDir(t), "host.sock")
	rootOnly := func(c PeerCred) error {
		if c.UID != 0 {
			return fmt.Errorf("%w: uid %d is not the pinned uid 0", ErrWrongPeer, c.UID)
		}
		return nil
	}
	s := startFrameServer(t, ListenConfig{Path: path, Mode: 0o666, Allow: rootOnly}, NewKeyring())
	line := runChildLine(t, "dial-handshake", uid, gid,
		"WIRE_SOCK="+path, "WIRE_SERVER_KEY="+hex.EncodeToString(s.key.Public().MarshalCOSEKey()))
	want := fmt.Sprintf("uid %d gid %d", uid, gid)
	if !strings.HasPrefix(line, "refused:") || !strings.Contains(line, want) || !strings.Contains(line, fmt.Sprintf("wire: wrong peer: uid %d is not the pinned uid 0", uid)) {
		t.Fatalf("child saw %q, want a refusal saying %q", line, want)
	}
	t.Logf("the child saw: %s", line)
	s.l.Close()
	select {
	case c := <-s.admitted:
		t.Fatalf("Accept returned the refused connection from uid %d", c.Cred.UID)
	default:
	}
	if log := s.log.String(); !strings.Contains(log, "refused connection") || !strings.Contains(log, fmt.Sprintf("uid=%d", uid)) {
		t.Fatalf("refusal not logged: %s", log)
	}
}

func TestPerUIDCapCountsEachAccount(t *testing.T) {
	// Root is at its per-UID cap; the second account still gets in, and
	// signs with a key file it owns.
	uid, gid := testAccount(t)
	pub := publicDir(t)
	keyDir := filepath.Join(pub, "childkeys")
	ck := mustKey(t)
	if err := WriteSigningKey(filepath.Join(keyDir, "child.key"), ck); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keyDir, filepath.Join(keyDir, "child.key")} {
		if err := os.Chown(p, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(pub, "host.sock")
	s := startFrameServer(t, ListenConfig{Path: path, Mode: 0o666, Allow: allowAll, MaxConns: 10, MaxPerUID: 1}, NewKeyring(ck.Public()))
	first, err := dialHandshake(t, path, ck, s.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	line := runChildLine(t, "dial-handshake", uid, gid, "WIRE_SOCK="+path,
		"WIRE_SERVER_KEY="+hex.EncodeToString(s.key.Public().MarshalCOSEKey()),
		"WIRE_CLIENT_KEY="+filepath.Join(keyDir, "child.key"))
	if line != "ok" {
		t.Fatalf("second account: %q, want ok", line)
	}
}

func TestDialWrongPeer(t *testing.T) {
	uid, gid := testAccount(t)
	_, path, _ := childListener(t, uid, gid)
	ctx := context.Background()
	// The socket and its directory belong to the peer; the listener is the
	// peer, not root.
	_, err := Dial(ctx, path, uid, 0)
	if !errors.Is(err, ErrWrongPeer) || !strings.Contains(err.Error(), fmt.Sprintf("listener is uid %d", uid)) {
		t.Fatalf("dial expecting root: %v, want ErrWrongPeer", err)
	}
	c, err := Dial(ctx, path, uid, uid)
	if err != nil {
		t.Fatalf("dial expecting the peer: %v", err)
	}
	c.Close()
	// And a socket owned by someone else than expected is refused before dialling.
	if _, err := Dial(ctx, path, 0, uid); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("dial expecting a root-owned socket: %v", err)
	}
}
