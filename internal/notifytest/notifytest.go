// Package notifytest is the tests' side of systemd's NOTIFY_SOCKET: a
// datagram socket that records each message with its sender's pid, as
// systemd does (SO_PASSCRED), for the tests of package systemd and of the
// daemons that notify through it. It is for tests only.
package notifytest

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Socket is a bound NOTIFY_SOCKET.
type Socket struct {
	// Path is where the socket is bound: the value for NOTIFY_SOCKET.
	Path string
	conn *net.UnixConn
}

// Listen binds a Socket in the test's temporary directory; it is closed
// when the test ends.
func Listen(t testing.TB) *Socket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return &Socket{Path: path, conn: conn}
}

// Next returns the next message and its sender's pid, failing the test if
// none arrives within the deadline.
func (s *Socket) Next(t testing.TB, within time.Duration) (string, int32) {
	t.Helper()
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	s.conn.SetReadDeadline(time.Now().Add(within))
	k, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatalf("no notification within %v: %v", within, err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v: %v", msgs, err)
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:k]), cred.Pid
}
