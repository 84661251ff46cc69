package wire

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bindSocket creates a listening socket file at path (no mode games: this is
// only a target for CheckSocketPath).
func bindSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func expectUnsafePath(t *testing.T, err error, path, reason string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("err %v, want ErrUnsafePath naming %s and %q", err, path, reason)
	}
}

func TestCheckSocketPath(t *testing.T) {
	euid := uint32(os.Geteuid())
	base := t.TempDir() // under /tmp: root-owned and sticky
	good := filepath.Join(base, "good.sock")
	bindSocket(t, good)
	if err := CheckSocketPath(good, euid); err != nil {
		t.Fatalf("good path: %v", err)
	}

	t.Run("group-writable ancestor", func(t *testing.T) {
		dir := filepath.Join(base, "gw")
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, 0o770)
		path := filepath.Join(dir, "s.sock")
		bindSocket(t, path)
		expectUnsafePath(t, CheckSocketPath(path, euid), path, "ancestor "+dir+" is group-writable (mode 0770)")
	})
	t.Run("world-writable non-sticky ancestor", func(t *testing.T) {
		dir := filepath.Join(base, "ww")
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, 0o777)
		path := filepath.Join(dir, "s.sock")
		bindSocket(t, path)
		expectUnsafePath(t, CheckSocketPath(path, euid), path, "ancestor "+dir+" is world-writable (mode 0777)")
	})
	t.Run("world-writable sticky ancestor not owned by root", func(t *testing.T) {
		// Owned by the peer (an admitted owner), but only root's sticky
		// directories are trusted.
		uid, gid := testAccount(t)
		dir := filepath.Join(base, "sticky")
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, 0o777|os.ModeSticky)
		path := filepath.Join(dir, "s.sock")
		bindSocket(t, path)
		os.Chown(dir, int(uid), int(gid))
		os.Chown(path, int(uid), int(gid))
		expectUnsafePath(t, CheckSocketPath(path, uid), path, "ancestor "+dir+" is world-writable (mode 0777) and not a root-owned sticky directory")
	})
	t.Run("ancestor owned by another account", func(t *testing.T) {
		uid, gid := testAccount(t)
		dir := filepath.Join(base, "theirs")
		os.Mkdir(dir, 0o755)
		path := filepath.Join(dir, "s.sock")
		bindSocket(t, path)
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
		expectUnsafePath(t, CheckSocketPath(path, euid), path, fmt.Sprintf("ancestor %s is owned by uid %d", dir, uid))
		// The same directory is fine when its owner is the socket's owner, the peer.
		os.Chown(path, int(uid), int(gid))
		if err := CheckSocketPath(path, uid); err != nil {
			t.Fatalf("peer-owned directory and socket: %v", err)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		path := filepath.Join(base, "file.sock")
		os.WriteFile(path, nil, 0o600)
		expectUnsafePath(t, CheckSocketPath(path, euid), path, "is not a socket")
	})
	t.Run("socket owned by the wrong account", func(t *testing.T) {
		expectUnsafePath(t, CheckSocketPath(good, euid+1), good, "socket is owned by uid")
	})
	t.Run("symlinked ancestor", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "link")
		os.Symlink(base, link)
		path := filepath.Join(link, "good.sock")
		expectUnsafePath(t, CheckSocketPath(path, euid), path, "ancestor "+link+" is a symlink")
	})
	t.Run("relative path", func(t *testing.T) {
		expectUnsafePath(t, CheckSocketPath("run/x.sock", euid), "run/x.sock", "not an absolute, clean path")
	})
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(base, "absent.sock")
		expectUnsafePath(t, CheckSocketPath(path, euid), path, "no such file")
	})
}
