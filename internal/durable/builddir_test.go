package durable

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// buildThree writes three files of n bytes each into dir, the shape of a
// store: a few small files, one of them in a subdirectory.
func buildThree(n int) func(string) error {
	return func(dir string) error {
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
			return err
		}
		for _, name := range []string{"a", "b", "sub/c"} {
			if err := WriteNew(filepath.Join(dir, name), bytes.Repeat([]byte("x"), n), 0o600); err != nil {
				return err
			}
		}
		return nil
	}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestBuildDirFullDisk: on a full tmpfs, each BuildDir fails and leaves
// nothing beside the filler; as space is freed a page at a time, the first
// one that succeeds leaves the whole tree.
func TestBuildDirFullDisk(t *testing.T) {
	disk := testenv.SmallTmpfs(t, 1<<20)
	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	st, err := filler.Stat()
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(disk, "store")
	const n = 10000 // three files of 3 pages each, with the directories
	failures := 0
	for size := st.Size(); ; size -= 4096 {
		if size < 0 {
			t.Fatal("BuildDir fails on an empty disk")
		}
		if err := filler.Truncate(size); err != nil {
			t.Fatal(err)
		}
		err := BuildDir(target, 0o700, slog.Default(), buildThree(n))
		if err == nil {
			break
		}
		failures++
		if !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("with %d bytes of filler: %v, want ENOSPC", size, err)
		}
		if have := entries(t, disk); len(have) != 1 || have[0] != "filler" {
			t.Fatalf("a failed BuildDir left %q", have)
		}
	}
	if failures < 3 {
		t.Fatalf("only %d failures before success: the disk was not full", failures)
	}
	for _, name := range []string{"a", "b", "sub/c"} {
		if b, err := os.ReadFile(filepath.Join(target, name)); err != nil || len(b) != n {
			t.Fatalf("%s: %d bytes, %v", name, len(b), err)
		}
	}
	if have := entries(t, disk); len(have) != 2 {
		t.Fatalf("disk holds %q, want filler and store", have)
	}
	t.Logf("%d failed builds, each leaving nothing", failures)
}

// TestBuildDirRefuses: an existing target (even an empty directory) and a
// temporary that another build holds are refused, exactly; the build
// function never runs.
func TestBuildDirRefuses(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "store")
	never := func(string) error { t.Fatal("build ran"); return nil }
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := BuildDir(target, 0o700, slog.Default(), never); !errors.Is(err, fs.ErrExist) || err.Error() != target+": file already exists" {
		t.Fatalf("existing target: %v", err)
	}
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(parent, TempPrefix(target)+"123")
	if err := os.Mkdir(held, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := lockDir(held)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	err = BuildDir(target, 0o700, slog.Default(), never)
	if want := "another init of it is under way: its temporary " + held + " is locked"; !errors.Is(err, ErrBuildUnderWay) || err.Error() != want {
		t.Fatalf("held temporary: %v, want %q", err, want)
	}
	if have := entries(t, parent); len(have) != 1 {
		t.Fatalf("parent holds %q, want the held temporary only", have)
	}
}

// TestBuildDirRemovesStale: a temporary of the target's pattern that no
// process holds (what a SIGKILLed build leaves; see the operator's
// TestInitAfterKilledInit for a real kill) is removed and logged, and the
// build succeeds; a name outside the pattern is left alone.
func TestBuildDirRemovesStale(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "store")
	stale := filepath.Join(parent, TempPrefix(target)+"456")
	if err := os.MkdirAll(filepath.Join(stale, "journal"), 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(parent, ".store.bak")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := BuildDir(target, 0o700, slog.New(slog.NewTextHandler(&log, nil)), buildThree(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale temporary: %v, want removed", err)
	}
	if want := "removed the temporary left by an interrupted init\" temporary=" + stale; !strings.Contains(log.String(), want) {
		t.Fatalf("log %q lacks %q", log.String(), want)
	}
	if have := entries(t, parent); len(have) != 2 || have[0] != ".store.bak" || have[1] != "store" {
		t.Fatalf("parent holds %q", have)
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("target mode %v, %v", fi.Mode(), err)
	}
}

// TestBuildDirFailedBuild: a build that fails leaves no target and no
// temporary, and returns the build's error.
func TestBuildDirFailedBuild(t *testing.T) {
	parent := t.TempDir()
	boom := errors.New("boom")
	err := BuildDir(filepath.Join(parent, "store"), 0o700, slog.Default(), func(tmp string) error {
		if err := buildThree(1)(tmp); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("err %v, want boom", err)
	}
	if have := entries(t, parent); len(have) != 0 {
		t.Fatalf("parent holds %q", have)
	}
}
