// Package umasktest runs a test's body under a chosen umask, for the tests
// that show a command creates its private files with the mode it asks for
// (0600, 0700 for directories) rather than with what a umask leaves. It is
// for tests only.
//
// The umask belongs to the whole process, so setting it inside a test
// binary would change what every other test running beside it creates.
// Under therefore re-executes the test binary to run just the one test, and
// sets the umask only in that child.
package umasktest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
)

// childEnv names the test and umask a re-executed child runs.
const childEnv = "STEWARD_UMASKTEST_CHILD"

// Under runs body with the process umask set to mask, in a child of the
// test binary that runs only t's test (a top-level test). The parent fails,
// showing the child's output, when the child fails or did not run the
// test, and skips when the child skipped. A test may call Under more than once with different masks: each
// child runs the body of its own call and skips the others.
func Under(t *testing.T, mask int, body func(t *testing.T)) {
	t.Helper()
	want := fmt.Sprintf("%s %04o", t.Name(), mask)
	if v, ok := os.LookupEnv(childEnv); ok {
		if v == want {
			syscall.Umask(mask)
			body(t)
		}
		return
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+want)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s under umask %04o: %v\n%s", t.Name(), mask, err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" (")) {
		t.Skipf("under umask %04o the child skipped:\n%s", mask, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" (")) {
		t.Fatalf("the child under umask %04o did not run %s:\n%s", mask, t.Name(), out)
	}
}

// CheckPrivate fails t unless, under root (itself included), every
// directory has mode 0700 and every other entry is a regular file of mode
// 0600, except the paths (relative to root) in public, each of which must
// exist with exactly the mode given.
func CheckPrivate(t *testing.T, root string, public map[string]fs.FileMode) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		t.Helper()
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		mode := fi.Mode()
		switch want, ok := public[rel]; {
		case ok:
			seen[rel] = true
			if mode != want {
				t.Errorf("%s: mode %v, want %v", path, mode, want)
			}
		case mode.IsDir():
			if mode.Perm() != 0o700 {
				t.Errorf("%s: directory mode %04o, want 0700", path, mode.Perm())
			}
		case !mode.IsRegular():
			t.Errorf("%s: %v, want a regular file of mode 0600", path, mode)
		case mode.Perm() != 0o600:
			t.Errorf("%s: mode %04o, want 0600", path, mode.Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range public {
		if !seen[rel] {
			t.Errorf("%s: missing", filepath.Join(root, rel))
		}
	}
}
