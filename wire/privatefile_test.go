package wire

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenPrivateFile: a 0600 file of this account under directories
// only it can change opens; each way another account could have written
// or could read it is refused with its reason, one past the limit where
// there is one (0600 opens, 0640 and 0604 do not).
func TestOpenPrivateFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		f, err := OpenPrivateFile(write(fmt.Sprintf("ok-%o", mode), mode))
		if err != nil {
			t.Fatalf("mode %04o: %v", mode, err)
		}
		if b, err := io.ReadAll(f); err != nil || string(b) != "{}" {
			t.Fatalf("read: %q %v", b, err)
		}
		f.Close()
	}
	if err := os.Symlink(filepath.Join(dir, "ok-600"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	inShared := write("shared/in", 0o600)
	if err := os.Chmod(shared, 0o770); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, reason string }{
		{write("g", 0o640), "has mode 0640: other accounts may read or change it (want 0600 or stricter: chmod 600)"},
		{write("o", 0o604), "has mode 0604: other accounts may read or change it (want 0600 or stricter: chmod 600)"},
		{write("w", 0o622), "has mode 0622: other accounts may read or change it (want 0600 or stricter: chmod 600)"},
		{filepath.Join(dir, "link"), "is a symlink"},
		{filepath.Join(dir, "fifo"), "is not a regular file"},
		{shared, "is not a regular file"},
		{inShared, fmt.Sprintf("ancestor %s is group-writable (mode 0770) and not a root-owned sticky directory", shared)},
	}
	if os.Geteuid() == 0 {
		other := write("other", 0o600)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ path, reason string }{other, "is owned by uid 65534, not by this account (uid 0)"})
	}
	for _, c := range cases {
		f, err := OpenPrivateFile(c.path)
		var ue *UnsafeFileError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnsafeFile) || ue.Reason != c.reason || ue.Path != c.path {
			if f != nil {
				f.Close()
			}
			t.Errorf("%s: %v, want the reason %q", c.path, err, c.reason)
		}
	}
	if _, err := OpenPrivateFile(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent: %v, want fs.ErrNotExist", err)
	}
}
