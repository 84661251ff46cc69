package index

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"
)

// A read-only open reads what its owner synced and refuses every write;
// it is refused while the owner holds the file, shares it with another
// reader, and never creates a file.
func TestReadOnly(t *testing.T) {
	x, path := open(t)
	must(x.Put("b", []byte("k"), []byte("v")))
	must(x.SetMeta("covers", []byte("m")))
	_, err := Open(path, Options{ReadOnly: true, LockTimeout: 20 * time.Millisecond, Logger: quiet})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("a read-only open while the owner holds it: %v", err)
	}
	must(x.Close())

	ro, err := Open(path, Options{ReadOnly: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	second, err := Open(path, Options{ReadOnly: true, LockTimeout: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	second.Close()
	if v, ok, err := ro.Get("b", []byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	if v, ok, err := ro.Meta("covers"); err != nil || !ok || string(v) != "m" {
		t.Fatalf("meta: %q %v %v", v, ok, err)
	}
	if err := ro.Put("b", []byte("k2"), []byte("v")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("put: %v", err)
	}
	if err := ro.SetMeta("covers", []byte("n")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("set meta: %v", err)
	}
	if _, err := Open(path, Options{LockTimeout: 20 * time.Millisecond, Logger: quiet}); !errors.Is(err, ErrLocked) {
		t.Fatalf("the owner while a reader holds it: %v", err)
	}

	absent := filepath.Join(t.TempDir(), "none", "history.db")
	if _, err := Open(absent, Options{ReadOnly: true, Logger: quiet}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read-only open of no file: %v", err)
	}
	if _, err := Open(filepath.Dir(absent), Options{ReadOnly: true, Logger: quiet}); err == nil {
		t.Fatal("a read-only open of a directory succeeded")
	}
}
