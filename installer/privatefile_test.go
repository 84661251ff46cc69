package installer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// operatorUID is the owner the tests hand files to. As root, a uid with no
// account is enough to own files (chown needs no account); otherwise the
// tests own the files themselves.
func operatorUID() uint32 {
	if os.Geteuid() == 0 {
		return 4242
	}
	return uint32(os.Geteuid())
}

// privateDir makes a directory the operator may keep request files in.
func privateDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "requests")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, d, operatorUID())
	return d
}

func chown(t *testing.T, path string, uid uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Lchown(path, int(uid), -1); err != nil {
		t.Fatal(err)
	}
}

// writePrivate writes an operator-owned file of n bytes with mode.
func writePrivate(t *testing.T, dir, name string, n int, mode os.FileMode) (string, []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	data := bytes.Repeat([]byte("r"), n)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	chown(t, p, operatorUID())
	return p, data
}

// refused asserts ReadPrivateFile refuses path with sentinel, naming the file
// and containing detail.
func refused(t *testing.T, path string, limit int64, sentinel error, detail string) {
	t.Helper()
	data, err := ReadPrivateFile(path, operatorUID(), limit)
	if !errors.Is(err, sentinel) {
		t.Fatalf("ReadPrivateFile(%s) = %v, want %v", path, err, sentinel)
	}
	if data != nil {
		t.Fatalf("ReadPrivateFile returned %d bytes with an error", len(data))
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, detail) || strings.Contains(msg, "\n") {
		t.Fatalf("error %q: want one line starting with the file name and containing %q", msg, detail)
	}
}

func TestReadPrivateFileBounds(t *testing.T) {
	dir := privateDir(t)
	for _, c := range []struct {
		name  string
		limit int64
	}{{"tool", ToolRequestLimit}, {"enroll", EnrollRequestLimit}} {
		t.Run(c.name, func(t *testing.T) {
			at, want := writePrivate(t, dir, c.name+"-at", int(c.limit), 0o600)
			got, err := ReadPrivateFile(at, operatorUID(), c.limit)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("a file of exactly %d bytes: %d bytes, %v", c.limit, len(got), err)
			}
			over, _ := writePrivate(t, dir, c.name+"-over", int(c.limit)+1, 0o600)
			refused(t, over, c.limit, ErrTooLarge, "the limit is")
		})
	}
	if ToolRequestLimit != 262144 || EnrollRequestLimit != 8192 {
		t.Fatalf("limits %d, %d; DESIGN.md section 8 says 262144 and 8192", ToolRequestLimit, EnrollRequestLimit)
	}
	empty, _ := writePrivate(t, dir, "empty", 0, 0o600)
	if got, err := ReadPrivateFile(empty, operatorUID(), 1); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %q, %v", got, err)
	}
}

func TestReadPrivateFileModes(t *testing.T) {
	dir := privateDir(t)
	for _, ok := range []os.FileMode{0o600, 0o400, 0o200, 0} {
		p, _ := writePrivate(t, dir, "ok-"+ok.String(), 3, ok)
		if os.Geteuid() != 0 && ok&0o400 == 0 {
			continue // only root reads a file it has no read bit on
		}
		if _, err := ReadPrivateFile(p, operatorUID(), 10); err != nil {
			t.Errorf("mode %04o: %v", ok, err)
		}
	}
	for _, bad := range []os.FileMode{0o644, 0o640, 0o604, 0o602, 0o620, 0o700, 0o610} {
		p, _ := writePrivate(t, dir, "bad-"+bad.String(), 3, bad)
		refused(t, p, 10, ErrMode, fmt.Sprintf("mode %04o", uint32(bad)))
	}
	// Set-id bits are refused too.
	p, _ := writePrivate(t, dir, "setuid", 3, 0o600|os.ModeSetuid)
	if err := syscall.Chmod(p, 0o4600); err != nil {
		t.Fatal(err)
	}
	refused(t, p, 10, ErrMode, "mode 4600")
}

func TestReadPrivateFileOwner(t *testing.T) {
	var p string
	if os.Geteuid() == 0 {
		p, _ = writePrivate(t, privateDir(t), "req", 3, 0o600)
		if err := os.Lchown(p, int(operatorUID())+1, -1); err != nil {
			t.Fatal(err)
		}
	} else {
		// Without root the file can only be ours, so expect another uid;
		// /tmp (root's, sticky) is a directory that rule accepts.
		f, err := os.CreateTemp("/tmp", "steward-owner-test.")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		p = f.Name()
		t.Cleanup(func() { os.Remove(p) })
	}
	want := operatorUID()
	if os.Geteuid() != 0 {
		want++
	}
	_, err := ReadPrivateFile(p, want, 10)
	if !errors.Is(err, ErrOwner) || !strings.Contains(err.Error(), fmt.Sprintf("want uid %d", want)) || !strings.HasPrefix(err.Error(), p) {
		t.Fatalf("wrong owner: %v", err)
	}
}

func TestReadPrivateFileLinks(t *testing.T) {
	dir := privateDir(t)
	target, _ := writePrivate(t, dir, "target", 3, 0o600)

	link := filepath.Join(dir, "symlink")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	chown(t, link, operatorUID())
	refused(t, link, 10, ErrSymlink, "symbolic link")

	hard := filepath.Join(dir, "hardlink")
	if err := os.Link(target, hard); err != nil {
		t.Fatal(err)
	}
	refused(t, hard, 10, ErrHardLinked, "2 links")
	refused(t, target, 10, ErrHardLinked, "2 links")
}

func TestReadPrivateFileNotRegular(t *testing.T) {
	dir := privateDir(t)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, fifo, operatorUID())
	refused(t, fifo, 10, ErrNotRegular, "FIFO")

	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, sub, operatorUID())
	refused(t, sub, 10, ErrNotRegular, "directory")

	if _, err := ReadPrivateFile(filepath.Join(dir, "absent"), operatorUID(), 10); err == nil ||
		!strings.Contains(err.Error(), filepath.Join(dir, "absent")) {
		t.Fatalf("absent file: %v", err)
	}
}

func TestReadPrivateFileDirectories(t *testing.T) {
	t.Run("group-writable parent", func(t *testing.T) {
		dir := privateDir(t)
		p, _ := writePrivate(t, dir, "req", 3, 0o600)
		if err := os.Chmod(dir, 0o770); err != nil {
			t.Fatal(err)
		}
		refused(t, p, 10, ErrUnsafeDir, "directory "+dir+" is writable by group (mode 0770)")
	})
	t.Run("world-writable parent", func(t *testing.T) {
		dir := privateDir(t)
		p, _ := writePrivate(t, dir, "req", 3, 0o600)
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		refused(t, p, 10, ErrUnsafeDir, "is writable by others (mode 0777)")
	})
	t.Run("sticky but not root's", func(t *testing.T) {
		testenv.NeedRoot(t, "to tell a root-owned sticky directory from the operator's")
		dir := privateDir(t)
		p, _ := writePrivate(t, dir, "req", 3, 0o600)
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		refused(t, p, 10, ErrUnsafeDir, "is writable by others (mode 1777)")
	})
	t.Run("root-owned sticky parent", func(t *testing.T) {
		testenv.NeedRoot(t, "to make a root-owned sticky directory")
		dir := filepath.Join(t.TempDir(), "tmp")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		p, want := writePrivate(t, dir, "req", 3, 0o600)
		if got, err := ReadPrivateFile(p, operatorUID(), 10); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("file in a root-owned sticky directory: %v", err)
		}
	})
	t.Run("parent of another account", func(t *testing.T) {
		testenv.NeedRoot(t, "to give a directory to another uid")
		dir := privateDir(t)
		p, _ := writePrivate(t, dir, "req", 3, 0o600)
		if err := os.Lchown(dir, int(operatorUID())+7, -1); err != nil {
			t.Fatal(err)
		}
		refused(t, p, 10, ErrUnsafeDir, "is owned by uid 4249")
	})
	t.Run("symlinked directory", func(t *testing.T) {
		dir := privateDir(t)
		real := filepath.Join(dir, "real")
		if err := os.Mkdir(real, 0o700); err != nil {
			t.Fatal(err)
		}
		chown(t, real, operatorUID())
		writePrivate(t, real, "req", 3, 0o600)
		link := filepath.Join(dir, "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		refused(t, filepath.Join(link, "req"), 10, ErrSymlink, "directory "+link)
	})
}

// TestReadPrivateFileSwapped swaps the file at the two points between its
// checks and its read, where a race would have to strike.
func TestReadPrivateFileSwapped(t *testing.T) {
	cases := []struct {
		name     string
		stage    string
		swap     func(t *testing.T, dir, path string)
		sentinel error
		detail   string
	}{
		{"other file renamed in", "examined", func(t *testing.T, dir, path string) {
			other, _ := writePrivate(t, dir, "other", 3, 0o600)
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, ErrChanged, "the file opened is not the file examined"},
		{"symlink swapped in", "examined", func(t *testing.T, dir, path string) {
			other, _ := writePrivate(t, dir, "other", 3, 0o600)
			os.Remove(path)
			if err := os.Symlink(other, path); err != nil {
				t.Fatal(err)
			}
		}, ErrChanged, "replaced by a link"},
		{"chmod after examining", "examined", func(t *testing.T, dir, path string) {
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrMode, "(after opening)"},
		{"hard link after examining", "examined", func(t *testing.T, dir, path string) {
			if err := os.Link(path, filepath.Join(dir, "second")); err != nil {
				t.Fatal(err)
			}
		}, ErrHardLinked, "(after opening)"},
		{"grown after examining", "examined", func(t *testing.T, dir, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 11), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrTooLarge, "11 bytes, the limit is 10 (after opening)"},
		{"grown while read", "checked", func(t *testing.T, dir, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 11), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrTooLarge, "grew past the limit of 10 bytes while being read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := privateDir(t)
			p, _ := writePrivate(t, dir, "req", 3, 0o600)
			testHook = func(stage string) {
				if stage == c.stage {
					c.swap(t, dir, p)
				}
			}
			defer func() { testHook = nil }()
			refused(t, p, 10, c.sentinel, c.detail)
		})
	}
}
