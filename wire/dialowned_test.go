package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDialOwnedSystemdListener is the socket systemd makes from a .socket
// unit: root calls listen(2) and chowns the file to the unit's SocketUser.
// Dial, which wants the listener to be the account, refuses it (that is
// why the controller binds its reverse socket itself); DialOwned admits
// it, because only root or the account could have put it there.
func TestDialOwnedSystemdListener(t *testing.T) {
	uid, gid := testAccount(t)
	dir := filepath.Join(publicDir(t), "ctl")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fg.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chown(path, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	_, err = Dial(ctx, path, uid, uid)
	if !errors.Is(err, ErrWrongPeer) || !strings.Contains(err.Error(), fmt.Sprintf("listener is uid 0 (pid %d), want uid %d", os.Getpid(), uid)) {
		t.Fatalf("Dial of a root listener: %v, want ErrWrongPeer naming uid 0", err)
	}
	c, err := DialOwned(ctx, path, uid)
	if err != nil {
		t.Fatalf("DialOwned of systemd's listener: %v", err)
	}
	c.Close()
	// The file is the account's, so expecting another owner is refused
	// before any connection.
	if _, err := DialOwned(ctx, path, uid+1); !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), fmt.Sprintf("socket is owned by uid %d, want uid %d", uid, uid+1)) {
		t.Fatalf("DialOwned expecting another owner: %v, want ErrUnsafePath", err)
	}
}

// TestDialOwnedWrongListener: a listener that is neither the socket file's
// owner nor root is refused, even when the file and directory check out.
func TestDialOwnedWrongListener(t *testing.T) {
	uid, gid := testAccount(t)
	const other = 4242 // the account the caller means to reach
	dir, path, pid := childListener(t, uid, gid)
	ctx := context.Background()
	c, err := DialOwned(ctx, path, uid)
	if err != nil {
		t.Fatalf("DialOwned of the owner's own listener: %v", err)
	}
	c.Close()
	// The file is handed to another account; its listener is still the peer.
	if err := os.Chown(path, other, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, other, other); err != nil {
		t.Fatal(err)
	}
	_, err = DialOwned(ctx, path, other)
	if !errors.Is(err, ErrWrongPeer) || !strings.Contains(err.Error(), fmt.Sprintf("listener is uid %d (pid %d), want uid %d or systemd's uid 0", uid, pid, other)) {
		t.Fatalf("DialOwned of a listener that is not the owner: %v, want ErrWrongPeer", err)
	}
}

// childListener runs a listener as the second account (uid, gid) on
// DIR/peer.sock, DIR being a directory of that account's, until the test
// ends; it returns DIR, the socket and the listener's pid.
func childListener(t *testing.T, uid, gid uint32) (dir, path string, pid int) {
	t.Helper()
	dir = filepath.Join(publicDir(t), "peer")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "peer.sock")
	cmd := childCommand(t, "listen", uid, gid, "WIRE_SOCK="+path, "GORACE=atexit_sleep_ms=0")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child listener: %q %v", line, err)
	}
	return dir, path, cmd.Process.Pid
}
