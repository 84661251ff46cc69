package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// TestInitKeysFullDisk: keys init on a full disk fails and leaves no key
// directory (before, it left some keys that the next init refused to
// overwrite); as space is freed a page at a time, it is retried until it
// succeeds, and the keys load.
func TestInitKeysFullDisk(t *testing.T) {
	disk := testenv.SmallTmpfs(t, 1<<20)
	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	st, err := filler.Stat()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(disk, "keys")
	failures := 0
	for size := st.Size(); ; size -= 4096 {
		if size < 0 {
			t.Fatal("keys init fails on an empty disk")
		}
		if err := filler.Truncate(size); err != nil {
			t.Fatal(err)
		}
		_, err := InitKeys(dir)
		if err == nil {
			break
		}
		failures++
		if !strings.HasPrefix(err.Error(), "keys init: ") || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("keys init with %d bytes of filler: %v", size, err)
		}
		if es, _ := os.ReadDir(disk); len(es) != 1 {
			t.Fatalf("a failed keys init left %v", es)
		}
	}
	if failures < 2 {
		t.Fatalf("only %d failed inits: the disk was not full", failures)
	}
	if _, err := LoadKeys(dir); err != nil {
		t.Fatal(err)
	}
}

// TestInitKeysExistingDir: an empty directory is replaced by the keys; a
// directory with anything in it is refused, exactly, and left as it was.
func TestInitKeysExistingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := InitKeys(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("key directory mode %v, %v; want 0700", fi.Mode(), err)
	}
	before, err := os.ReadFile(filepath.Join(dir, ToolKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	_, err = InitKeys(dir)
	if want := "keys init: " + dir + " already exists and is not empty: keys are never overwritten"; err == nil || err.Error() != want {
		t.Fatalf("second keys init: %v, want %q", err, want)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, ToolKeyFile)); string(after) != string(before) {
		t.Fatal("the second keys init changed the tool key")
	}
}
