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
	"testing"
)

// GoldenDir returns journal/testdata/golden/version/part in the source tree
// (found from this file's path, which `go test` compiles in).
func GoldenDir(tb testing.TB, version, part string) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("journaltest: no source path for the golden journals")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "testdata", "golden", version, part)
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
	src := GoldenDir(tb, version, part)
	dst := filepath.Join(tb.TempDir(), part)
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
		tb.Fatalf("journaltest: copy golden journals: %v", err)
	}
	return dst
}
