package appliance

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestPeerCheckRefusesAnotherAccount runs the listener with a check whose
// account is not this process's, so that this process is the other
// account: each of its connections, silent, is answered with a 403 at
// once and closed, and holds none of the slots.
func TestPeerCheckRefusesAnotherAccount(t *testing.T) {
	sock := filepath.Join(shortDir(t), "app.sock")
	ln, err := listenUnix(sock, quietLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	host := uint32(os.Geteuid()) + 4242
	gid := uint32(os.Getegid()) + 4242
	l := &limitListener{UnixListener: ln, slots: make(chan struct{}, 1),
		peers: peerCheck{socket: sock, self: host, gid: gid}, log: quietLogger(t)}
	go l.Accept() // takes the one slot and refuses every peer it meets

	want := fmt.Sprintf(`{"error":{"code":"refused","details":null,"message":"peer uid %d gid %d is not the host's account (uid %d, group %d, or [])"}}`,
		os.Geteuid(), os.Getegid(), host, gid)
	for i := range 3 { // more peers than slots: none of them holds one
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("peer %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden || string(body) != want || !resp.Close {
			t.Fatalf("peer %d: %s %q (close %v)\nwant 403 %q", i, resp.Status, body, resp.Close, want)
		}
	}
}

// TestPeerCheckAdmitsTheHost: the appliance's own account, the socket's
// group and Config.PeerUIDs are served.
func TestPeerCheckAdmitsTheHost(t *testing.T) {
	self, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	for _, p := range []peerCheck{
		{self: self, gid: gid + 1},
		{self: self + 1, gid: gid},
		{self: self + 1, gid: gid + 1, uids: []uint32{7, self}},
	} {
		a, _ := unixPair(t)
		if err := p.admit(a); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
	}
	a := startApp(t, Config{})
	if status, _ := a.do(http.MethodGet, "/v1/operations", nil); status != http.StatusOK {
		t.Fatalf("the appliance's own account: %d", status)
	}
}

// unixPair is a connected pair of Unix sockets of this process.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	sock := filepath.Join(shortDir(t), "pair.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, b
}
