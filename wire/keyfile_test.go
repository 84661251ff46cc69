package wire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestKeyFileRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys") // absent: created 0700
	k := mustKey(t)
	path := filepath.Join(dir, "operator.key")
	if err := WriteSigningKey(path, k); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v, want %v (%v)", p, fi.Mode(), want, err)
		}
	}
	got, err := ReadSigningKey(path)
	if err != nil || !got.Public().Equal(k.Public()) {
		t.Fatalf("read back: %v", err)
	}
	// O_EXCL: an existing key is never overwritten.
	if err := WriteSigningKey(path, mustKey(t)); !errors.Is(err, os.ErrExist) {
		t.Fatalf("overwrite: %v, want ErrExist", err)
	}
	if again, _ := ReadSigningKey(path); !again.Public().Equal(k.Public()) {
		t.Fatal("the existing key changed")
	}

	h, err := GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	hpath := filepath.Join(dir, "authority.key")
	if err := WriteHybridKey(hpath, h); err != nil {
		t.Fatal(err)
	}
	hgot, err := ReadHybridKey(hpath)
	if err != nil || !hgot.Public().Equal(h.Public()) {
		t.Fatalf("hybrid read back: %v", err)
	}
	// The key read back signs what the original's public key verifies.
	msg, _ := SignHybrid(hgot, []byte("x"))
	if _, err := VerifyHybrid(msg, h.Public()); err != nil {
		t.Fatal(err)
	}

	pubDir := filepath.Join(t.TempDir(), "pub")
	ppath := filepath.Join(pubDir, "operator.pub")
	if err := WritePublicKeyFile(ppath, k.Public()); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(ppath); fi.Mode() != 0o644 {
		t.Fatalf("public key file mode %v", fi.Mode())
	}
	if p, err := ReadPublicKeyFile(ppath); err != nil || !p.Equal(k.Public()) {
		t.Fatalf("public read back: %v", err)
	}
	hppath := filepath.Join(pubDir, "authority.pub")
	if err := WriteHybridPublicKeyFile(hppath, h.Public()); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadHybridPublicKeyFile(hppath); err != nil || !p.Equal(h.Public()) {
		t.Fatalf("hybrid public read back: %v", err)
	}
	// A public key file is not a private key file.
	if _, err := ReadSigningKey(ppath); err == nil {
		t.Fatal("read a public key file as a signing key")
	}
}

// privateKeyDir makes a 0700 directory holding one good key file.
func privateKeyDir(t *testing.T) (dir, path string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "keys")
	path = filepath.Join(dir, "k.key")
	if err := WriteSigningKey(path, mustKey(t)); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func expectUnsafe(t *testing.T, err error, path, reason string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafeKeyFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("err %v, want ErrUnsafeKeyFile naming %s and %q", err, path, reason)
	}
}

func TestKeyFileRefusals(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		t.Run(fmt.Sprintf("mode %04o", mode), func(t *testing.T) {
			_, path := privateKeyDir(t)
			os.Chmod(path, mode)
			_, err := ReadSigningKey(path)
			expectUnsafe(t, err, path, "must not grant group or other any access")
		})
	}
	t.Run("symlinked file", func(t *testing.T) {
		dir, path := privateKeyDir(t)
		link := filepath.Join(dir, "link.key")
		os.Symlink(path, link)
		_, err := ReadSigningKey(link)
		expectUnsafe(t, err, link, "is a symlink")
	})
	t.Run("symlinked directory", func(t *testing.T) {
		dir, _ := privateKeyDir(t)
		linkDir := filepath.Join(t.TempDir(), "linkdir")
		os.Symlink(dir, linkDir)
		path := filepath.Join(linkDir, "k.key")
		_, err := ReadSigningKey(path)
		expectUnsafe(t, err, path, "is a symlink or not a directory")
	})
	t.Run("directory 0755", func(t *testing.T) {
		dir, path := privateKeyDir(t)
		os.Chmod(dir, 0o755)
		_, err := ReadSigningKey(path)
		expectUnsafe(t, err, path, "has mode 0755")
		// And writing a new key there is refused too.
		newPath := filepath.Join(dir, "new.key")
		expectUnsafe(t, WriteSigningKey(newPath, mustKey(t)), newPath, "has mode 0755")
		if _, err := os.Lstat(newPath); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a key was written into a 0755 directory")
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		dir, _ := privateKeyDir(t)
		fifo := filepath.Join(dir, "fifo.key")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadSigningKey(fifo) // must not hang on the FIFO
		expectUnsafe(t, err, fifo, "is not a regular file")
	})
	t.Run("malformed content", func(t *testing.T) {
		dir, _ := privateKeyDir(t)
		path := filepath.Join(dir, "junk.key")
		os.WriteFile(path, []byte("not a key"), 0o600)
		_, err := ReadSigningKey(path)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), path) {
			t.Fatalf("err %v, want ErrMalformed naming the file", err)
		}
	})
	t.Run("public key file writable by group", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "p.pub")
		WritePublicKeyFile(path, mustKey(t).Public())
		os.Chmod(path, 0o664)
		_, err := ReadPublicKeyFile(path)
		expectUnsafe(t, err, path, "must not grant group or other write access")
	})
	t.Run("owned by another account", func(t *testing.T) {
		uid, gid := testAccount(t)
		dir, path := privateKeyDir(t)
		if err := os.Chown(path, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
		_, err := ReadSigningKey(path)
		expectUnsafe(t, err, path, "is owned by uid")
		os.Chown(path, 0, 0)
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
		_, err = ReadSigningKey(path)
		expectUnsafe(t, err, path, "directory "+dir+" is owned by uid")
	})
}
