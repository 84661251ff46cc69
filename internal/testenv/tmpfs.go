package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallTmpfs mounts a tmpfs of size bytes on a new directory under
// t.TempDir() and returns its path; t.Cleanup unmounts it. A test fills
// it to make a real disk full (ENOSPC). It needs root (Missing otherwise:
// a skip, or a failure under CI=true). The mount is in the test's own
// mount namespace, on a directory only the test made.
func SmallTmpfs(t testing.TB, size int64) string {
	t.Helper()
	NeedRoot(t, "to mount a small tmpfs for a full disk")
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	SmallTmpfsAt(t, dir, size)
	return dir
}

// SmallTmpfsAt is SmallTmpfs on dir, an empty directory the test made
// (where a program under test expects a real directory, not a symlink to
// one): part of a tree on a disk of its own. t.Cleanup unmounts it, so
// it must be registered after any cleanup that removes dir's parent.
func SmallTmpfsAt(t testing.TB, dir string, size int64) {
	t.Helper()
	NeedRoot(t, "to mount a small tmpfs for a full disk")
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		Missing(t, "mount a tmpfs on %s: %v", dir, err)
	}
	// Cleanups run last-registered first: this unmount runs before
	// t.TempDir's removal, which could not remove a mount point.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the test's tmpfs %s: %v", dir, err)
		}
	})
}

// FillDisk creates a file at path and writes zeros to it until the file
// system is full (ENOSPC), and returns the file, open, for the test to
// truncate when it frees space.
func FillDisk(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	buf := make([]byte, 64<<10)
	for {
		_, err := f.Write(buf)
		if err == nil {
			continue
		}
		if pe, ok := err.(*os.PathError); ok && pe.Err == unix.ENOSPC {
			return f
		}
		t.Fatalf("fill %s: %v", path, err)
	}
}
