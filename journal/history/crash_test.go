package history

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal/snapshot"
)

// An owner records calls and makes a snapshot; a child owner records more
// and is SIGKILLed inside the next snapshot: after the index's sync, before
// the snapshot file's fsync, after it, before and after its rename. The
// next Open uses the newest complete snapshot (the second, killed after
// its rename; else the first), replays what follows it, meeting the
// tasks the index already holds from the killed pass, and its state is
// what a full replay gives.
func TestCrashInsideSnapshot(t *testing.T) {
	for _, fp := range []string{FailAfterIndexSync, snapshot.FailBeforeFsync, snapshot.FailAfterFsync,
		snapshot.FailBeforeRename, snapshot.FailAfterRename} {
		t.Run(fp, func(t *testing.T) {
			g := newRig(t, 1_000_000)
			k, _ := g.open(t)
			calls(t, k.Journal(), 0, 50)
			first, _, err := k.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			g.close(t, k)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHistoryChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "HISTORY_CHILD_DIR="+g.dir, failpoint.Env+"="+fp)
			out, err := cmd.CombinedOutput()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed at %s: %v\n%s", fp, err, out)
			}
			k, op := g.open(t)
			defer g.close(t, k)
			want := snapshot.Name(first.Seq)
			if fp == snapshot.FailAfterRename {
				want = snapshot.Name(k.Journal().LastSeq())
			}
			if op.Snapshot != want || len(op.Rejected) != 0 {
				t.Fatalf("opened from %q (want %q), rejected %s", op.Snapshot, want, rejectedReasons(op))
			}
			t.Logf("after a kill at %s: opened from %s, replayed %d records, cleaned %v", fp, op.Snapshot, op.Replayed, op.Cleaned)
			sameAsFullReplay(t, g, op.State, g.x)
		})
	}
}

// TestHistoryChild is the crash test's child (only with
// HISTORY_CHILD_DIR): it records more calls and is killed inside its
// snapshot at the armed failpoint.
func TestHistoryChild(t *testing.T) {
	dir := os.Getenv("HISTORY_CHILD_DIR")
	if dir == "" {
		t.Skip("the crash test's child")
	}
	g := &rig{dir: dir, every: 1_000_000}
	k, _ := g.open(t)
	calls(t, k.Journal(), 50, 50)
	if _, _, err := k.Snapshot(); err != nil {
		t.Fatal(err)
	}
	t.Fatal("not killed")
}
