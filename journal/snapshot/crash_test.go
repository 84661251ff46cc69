package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A child writes snapshot 200 over a directory that holds snapshot 100
// and is SIGKILLed at each failpoint of Write. Afterwards snapshot 100 is
// intact and loadable; snapshot 200 is absent (and a temporary is left,
// which the next Load removes and reports) or complete and valid.
func TestCrashAtEachFailpoint(t *testing.T) {
	for _, c := range []struct {
		fp       string
		renamed  bool // the new snapshot is in place
		leftTemp bool
	}{
		{FailBeforeFsync, false, true},
		{FailAfterFsync, false, true},
		{FailBeforeRename, false, true},
		{FailAfterRename, true, false},
	} {
		t.Run(c.fp, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap")
			write(t, dir, 100)
			killed, out := runHelper(t, dir, 200, c.fp)
			if !killed {
				t.Fatalf("the child was not killed at %s: %s", c.fp, out)
			}
			t.Logf("after a SIGKILL at %s: %s", c.fp, listing(t, dir))
			temps := tempsIn(t, dir)
			if got := len(temps) == 1; got != c.leftTemp {
				t.Fatalf("temporaries %v", temps)
			}
			_, err := os.Stat(fileOf(dir, 200))
			if (err == nil) != c.renamed {
				t.Fatalf("snapshot 200 there: %v, want %v", err == nil, c.renamed)
			}
			// The previous snapshot is intact and loadable.
			prev, err := Load(dir, testFormat, verify, func(s Snapshot) error {
				if s.Mark.Seq != 100 {
					return fmt.Errorf("not the previous one")
				}
				return nil
			})
			if err != nil || prev.Mark.Seq != 100 || string(prev.State) != "state at 100" {
				t.Fatalf("the previous snapshot after the crash: %+v %v", prev.Mark, err)
			}
			if !slices.Equal(prev.Cleaned, temps) {
				t.Fatalf("Load cleaned %v, want %v", prev.Cleaned, temps)
			}
			if left := tempsIn(t, dir); len(left) != 0 {
				t.Fatalf("temporaries left after Load: %v", left)
			}
			t.Logf("after the next Load: %s", listing(t, dir))
			l, err := Load(dir, testFormat, verify, nil)
			want := uint64(100)
			if c.renamed {
				want = 200
			}
			if err != nil || l.Mark.Seq != want || len(l.Rejected) != 0 {
				t.Fatalf("newest valid snapshot: %d (%+v, %v), want %d", l.Mark.Seq, l.Rejected, err, want)
			}
		})
	}
}

// Unarmed, the child writes and exits: the crash test's child works.
func TestHelperWritesWithoutFailpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	if killed, out := runHelper(t, dir, 7, ""); killed || !strings.Contains(out, "written") {
		t.Fatalf("child killed %v: %s", killed, out)
	}
	if l, err := Load(dir, testFormat, verify, nil); err != nil || l.Mark.Seq != 7 {
		t.Fatalf("%+v %v", l.Mark, err)
	}
}

// listing shows dir's files and their sizes, on one line.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var parts []string
	for _, n := range names(t, dir) {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s (%d bytes)", n, fi.Size()))
	}
	return dir + ": " + strings.Join(parts, ", ")
}
