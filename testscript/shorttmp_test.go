package testscript_test

import (
	"os"
	"testing"
)

// shortTempRoot holds every temporary directory of the journeys that will
// hold a Unix socket (the journeys' work directories, the shared and
// notify directories, the README commands' runtime directory): /tmp, not
// $TMPDIR. A socket path is at most 107 bytes and $TMPDIR may be as long as
// a home directory; under /tmp the journeys' socket paths fit whatever
// $TMPDIR is.
const shortTempRoot = "/tmp"

// shortTempDir makes a directory under shortTempRoot that the test removes
// when it ends.
func shortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(shortTempRoot, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
