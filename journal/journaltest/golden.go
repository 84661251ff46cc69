// Package journaltest gives tests the golden journals: a committed segment
// of each journal format as an earlier version of steward wrote it, under
// journal/testdata/golden/VERSION/PART (PART is host, controller or
// appliance; see the generator in package dev, TestWriteGoldenJournals).
// Every version's journals must keep opening and verifying with the readers
// of today, so a change of a record format is a deliberate, versioned act
// that still reads the old records.
package journaltest

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goldenRoot returns journal/testdata/golden in the source tree (found
// from this file's path, which `go test` compiles in).
func goldenRoot(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("journaltest: no source path for the golden journals")
	}
	return filepath.Join(filepath.Dir(file), "..", "testdata", "golden")
}

// Versions lists the committed versions of the golden journals (v1, v2,
// ...), in order, so that an owner's test covers each one, a new one
// included.
func Versions(tb testing.TB) []string {
	tb.Helper()
	entries, err := os.ReadDir(goldenRoot(tb))
	if err != nil {
		tb.Fatalf("journaltest: golden journals: %v", err)
	}
	var vs []string
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "v")); e.IsDir() && err == nil && n > 0 && e.Name() == "v"+strconv.Itoa(n) {
			vs = append(vs, e.Name())
		}
	}
	sort.Slice(vs, func(a, b int) bool {
		x, _ := strconv.Atoi(vs[a][1:])
		y, _ := strconv.Atoi(vs[b][1:])
		return x < y
	})
	if len(vs) == 0 {
		tb.Fatal("journaltest: no golden journals")
	}
	return vs
}

// GoldenDir returns journal/testdata/golden/version/part in the source tree.
func GoldenDir(tb testing.TB, version, part string) string {
	tb.Helper()
	dir := filepath.Join(goldenRoot(tb), version, part)
	if _, err := os.Stat(dir); err != nil {
		tb.Fatalf("journaltest: golden journals: %v", err)
	}
	return dir
}

// CopyGolden copies the golden journals of version and part into a new
// temporary directory and returns it. The copy has the modes the owners
// require (directories 0700, files 0600), which a checkout does not keep,
// and a test may write to it: the committed files stay as they are.
func CopyGolden(tb testing.TB, version, part string) string {
	tb.Helper()
	return CopyDir(tb, GoldenDir(tb, version, part))
}

// CopyDir copies the tree at src (a store or journal a test keeps in
// testdata) into a new temporary directory, directories 0700 and files
// 0600 as a journal requires (a checkout does not keep modes), and
// returns the copy's path.
func CopyDir(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.Mkdir(to, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		tb.Fatalf("journaltest: copy %s: %v", src, err)
	}
	return dst
}
