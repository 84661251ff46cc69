package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAtomic writes a new file and replaces it: each time the
// whole content with the mode asked for, and no temporary file left beside
// it. (The fsync of the directory after the rename is not observable here;
// it is what makes the rename survive a crash.)
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	for _, want := range []string{"first\n", "second, longer than the first\n", "3\n"} {
		if err := WriteAtomic(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(path)
		if err != nil || string(have) != want {
			t.Fatalf("read %q, %v; want %q", have, err, want)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v; want 0600", st.Mode().Perm(), err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 1 {
			t.Fatalf("directory holds %v, %v; want only config.json", entries, err)
		}
	}
}

// TestWriteAtomicMissingDir reports a missing directory and writes nothing.
func TestWriteAtomicMissingDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "absent", "config.json")
	if err := WriteAtomic(path, []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err %v, want one wrapping fs.ErrNotExist", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("directory holds %v, %v; want nothing", entries, err)
	}
}

// TestWriteNew creates a file with its mode and refuses to replace one.
func TestWriteNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "operator.pub")
	if err := WriteNew(path, []byte("key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "key" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := WriteNew(path, []byte("other"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second WriteNew: err %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "key" {
		t.Fatalf("the existing file was changed to %q", b)
	}
}
