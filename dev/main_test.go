package dev

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// testRoot holds what the tests' environment points at, removed at the end.
var testRoot string

// TestMain points every place a dev stack may write outside its --state at
// a directory of the test binary's own, so that no test touches the
// machine's: XDG_STATE_HOME (the default state), XDG_RUNTIME_DIR and
// tmpRoot (the sockets). It is under /tmp, not $TMPDIR, so that the socket
// paths fit however long $TMPDIR is.
func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("/tmp", "stdv")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testRoot = root
	code := func() int {
		defer os.RemoveAll(root)
		for _, d := range []string{"state", "run", "tmp"} {
			if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		os.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
		os.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
		tmpRoot = filepath.Join(root, "tmp")
		return m.Run()
	}()
	os.Exit(code)
}
