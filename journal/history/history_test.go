package history

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// A first Open replays everything; the snapshots made while running and
// at Close make the next Open replay nothing, and its state is what a
// full replay gives, with every ended task in the index and none in
// memory.
func TestSnapshotStartIsFullReplay(t *testing.T) {
	g := newRig(t, 100)
	k, op := g.open(t)
	if op.Snapshot != "" || op.Replayed != 1 || len(op.Rejected) != 0 {
		t.Fatalf("first open: %+v", op)
	}
	calls(t, k.Journal(), 0, 120)
	m, name, err := k.Snapshot()
	if err != nil || name != snapshot.Name(m.Seq) || m.Seq != k.Journal().LastSeq() {
		t.Fatalf("snapshot: %+v %q %v", m, name, err)
	}
	if _, again, err := k.Snapshot(); err != nil || again != "" {
		t.Fatalf("a second snapshot with nothing new: %q %v", again, err)
	}
	calls(t, k.Journal(), 120, 30)
	g.close(t, k)

	k, op = g.open(t)
	defer g.close(t, k)
	if op.Snapshot != snapshot.Name(k.Journal().LastSeq()) || op.Replayed != 0 || len(op.Rejected) != 0 {
		t.Fatalf("second open: snapshot %q, replayed %d, rejected %s", op.Snapshot, op.Replayed, rejectedReasons(op))
	}
	live := op.State.(*tasks)
	if len(live.Ended) != 0 {
		t.Fatalf("%d ended tasks in memory", len(live.Ended))
	}
	sameAsFullReplay(t, g, op.State, g.x)
}

// Records after the snapshot are replayed onto it, ended ones into the
// index, and the state is the full replay's; an open after a replay of
// Every records or more writes a snapshot before it returns.
func TestTailReplay(t *testing.T) {
	g := newRig(t, 50)
	k, _ := g.open(t)
	calls(t, k.Journal(), 0, 20)
	if _, _, err := k.Snapshot(); err != nil {
		t.Fatal(err)
	}
	calls(t, k.Journal(), 20, 40) // 76 records after the snapshot
	// A crash: no last snapshot at Close. The journal is closed as a
	// killed process leaves it (every record durable), the index synced.
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	if err := k.j.Close(); err != nil {
		t.Fatal(err)
	}
	g.x.Close()

	k, op := g.open(t)
	defer g.close(t, k)
	if op.Replayed != 76 || op.Wrote != snapshot.Name(k.Journal().LastSeq()) {
		t.Fatalf("open after a crash: replayed %d, wrote %q", op.Replayed, op.Wrote)
	}
	sameAsFullReplay(t, g, op.State, g.x)
}

// A damaged newest snapshot is reported by name and why, and the next
// older one is used; the state is the full replay's.
func TestDamagedSnapshotFallsBack(t *testing.T) {
	g := newRig(t, 1000)
	k, _ := g.open(t)
	calls(t, k.Journal(), 0, 10)
	old, _, err := k.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	calls(t, k.Journal(), 10, 10)
	snap(t, k) // the newest snapshot
	g.close(t, k)
	newest := filepath.Join(g.snapDir(), snapshot.Name(k.Journal().LastSeq()))
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(newest, b, 0o600); err != nil {
		t.Fatal(err)
	}

	k, op := g.open(t)
	if op.Snapshot != snapshot.Name(old.Seq) || len(op.Rejected) != 1 || op.Rejected[0].Name != filepath.Base(newest) {
		t.Fatalf("open: snapshot %q, rejected %s", op.Snapshot, rejectedReasons(op))
	}
	t.Logf("rejected: %s", rejectedReasons(op))
	sameAsFullReplay(t, g, op.State, g.x)

	// The clean close snapshots the same mark: the refused file is set
	// aside, byte for byte, and the next start loads the new snapshot
	// instead of replaying again from the older one.
	g.close(t, k)
	aside, err := os.ReadFile(newest + snapshot.RefusedSuffix)
	if err != nil || !bytes.Equal(aside, b) {
		t.Fatalf("the refused snapshot set aside: %v (same bytes: %v)", err, bytes.Equal(aside, b))
	}
	k, op = g.open(t)
	defer g.close(t, k)
	if op.Snapshot != filepath.Base(newest) || len(op.Rejected) != 0 || op.Replayed != 0 {
		t.Fatalf("open after the close: snapshot %q, replayed %d, rejected %s", op.Snapshot, op.Replayed, rejectedReasons(op))
	}
	sameAsFullReplay(t, g, op.State, g.x)
}

// A snapshot of another journal is refused by the journal
// (journal.ErrMarkMismatch), reported, and a full replay is made.
func TestSnapshotOfAnotherJournal(t *testing.T) {
	a, b := newRig(t, 1000), newRig(t, 1000)
	for i, g := range []*rig{a, b} {
		k, _ := g.open(t)
		calls(t, k.Journal(), i*1000, 10+i) // b's journal is longer
		snap(t, k)
		g.close(t, k)
	}
	if err := os.RemoveAll(a.snapDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(b.snapDir(), a.snapDir()); err != nil {
		t.Fatal(err)
	}
	// a's index covers nothing of b's marks: without a check of the
	// index the journal alone must refuse, so open a with a fresh one.
	if err := os.RemoveAll(filepath.Dir(a.indexPath())); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(a.indexPath(), index.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	o := a.options(t, x)
	o.Index = nil // no coverage check: the journal is what refuses
	k, op, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if op.Snapshot != "" || !isRejected(op, journal.ErrMarkMismatch) {
		t.Fatalf("open: snapshot %q, rejected %s", op.Snapshot, rejectedReasons(op))
	}
	t.Logf("rejected: %s", rejectedReasons(op))
	sameAsFullReplay(t, a, op.State, x)
}

// An index rebuilt empty (its file lost or damaged) covers no snapshot:
// each is refused with ErrIndexBehind and a full replay refills the index.
func TestIndexBehind(t *testing.T) {
	g := newRig(t, 1000)
	k, _ := g.open(t)
	calls(t, k.Journal(), 0, 30)
	snap(t, k)
	g.close(t, k)
	if err := os.RemoveAll(filepath.Dir(g.indexPath())); err != nil {
		t.Fatal(err)
	}
	k, op := g.open(t)
	defer g.close(t, k)
	if op.Snapshot != "" || !isRejected(op, ErrIndexBehind) {
		t.Fatalf("open: snapshot %q, rejected %s", op.Snapshot, rejectedReasons(op))
	}
	if !strings.Contains(op.Rejected[0].Reason, "covers records up to 0") {
		t.Fatalf("reason %q", op.Rejected[0].Reason)
	}
	sameAsFullReplay(t, g, op.State, g.x)
}

// A snapshot whose state refuses a record after its mark is refused and
// the older one (or a full replay) decides; a journal error no snapshot
// causes (the journal's lock held) fails Open at once.
func TestJournalErrorsAreNotSnapshots(t *testing.T) {
	g := newRig(t, 1000)
	k, _ := g.open(t)
	defer g.close(t, k)
	calls(t, k.Journal(), 0, 5)
	if _, _, err := k.Snapshot(); err != nil {
		t.Fatal(err)
	}
	o := g.options(t, nil)
	_, op, err := Open(o)
	if !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("a second Open: %v", err)
	}
	if len(op.Rejected) != 1 {
		t.Fatalf("rejected %s", rejectedReasons(op))
	}
}

// A record the replica refuses (the live path wrote what replay refuses)
// stops the keeper for good, naming the record.
func TestReplicaRefusalStops(t *testing.T) {
	g := newRig(t, 1000)
	k, _ := g.open(t)
	defer g.close(t, k)
	calls(t, k.Journal(), 0, 3)
	seq, err := k.Journal().Append(kindEnd, "never-opened")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = k.Snapshot()
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "task never-opened is not open") {
		t.Fatalf("snapshot: %v", err)
	}
	if !errors.Is(k.Err(), ErrStopped) {
		t.Fatalf("Err: %v", k.Err())
	}
	if _, _, err := k.Snapshot(); !errors.Is(err, ErrStopped) {
		t.Fatalf("a later snapshot: %v", err)
	}
	if names, _ := os.ReadDir(g.snapDir()); len(names) != 0 {
		t.Fatalf("a snapshot was written past record %d: %v", seq, names)
	}
}

// Run makes a snapshot once one is due and tells the owner its mark.
func TestRunSnapshotsWhenDue(t *testing.T) {
	g := newRig(t, 40)
	k, _ := g.open(t)
	defer g.close(t, k)
	done := make(chan journal.Mark, 1)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- k.Run(ctx, time.Millisecond, func(m journal.Mark) { done <- m }) }()
	calls(t, k.Journal(), 0, 30) // 57 records: due
	m := <-done
	if m.Seq < 40 {
		t.Fatalf("snapshot at %d", m.Seq)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// A read-only keeper opens a journal its owner holds, from the owner's
// snapshot, and writes nothing.
func TestReadOnly(t *testing.T) {
	g := newRig(t, 1000)
	k, _ := g.open(t)
	defer g.close(t, k)
	calls(t, k.Journal(), 0, 20)
	if _, _, err := k.Snapshot(); err != nil {
		t.Fatal(err)
	}
	calls(t, k.Journal(), 20, 5)
	o := g.options(t, nil)
	o.ReadOnly = true
	ro, op, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if op.Snapshot == "" || op.Replayed == 0 {
		t.Fatalf("read-only open: %+v", op)
	}
	if got, want := op.State.(*tasks).Count, g.fullReplay(t).Count; got != want {
		t.Fatalf("read-only state: %d ended, want %d", got, want)
	}
	if _, _, err := ro.Snapshot(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only snapshot: %v", err)
	}
}

// snap makes a snapshot, failing the test on an error.
func snap(t *testing.T, k *Keeper) {
	t.Helper()
	if _, _, err := k.Snapshot(); err != nil {
		t.Fatal(err)
	}
}

// Close makes a last snapshot when anything was recorded since the last,
// and none when nothing was.
func TestCloseSnapshots(t *testing.T) {
	g := newRig(t, 100)
	k, _ := g.open(t)
	snap(t, k)
	g.close(t, k)
	k, op := g.open(t)
	if op.Replayed != 0 || op.Snapshot != snapshot.Name(1) {
		t.Fatalf("after a close with nothing new: replayed %d from %q", op.Replayed, op.Snapshot)
	}
	calls(t, k.Journal(), 0, 1)
	g.close(t, k)
	k, op = g.open(t)
	defer g.close(t, k)
	if op.Replayed != 0 || op.Snapshot != snapshot.Name(k.Journal().LastSeq()) {
		t.Fatalf("after a close with two records new: replayed %d from %q", op.Replayed, op.Snapshot)
	}
}
