package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/journal/index"
)

// TestIndexWriteFailsInsideASnapshot fills the disk (a small tmpfs) under
// a snapshot whose replica puts more ended tasks than the index holds
// pending, so that the index flushes, and fails, inside the replica's
// Apply of a record. The keeper makes the replica again from its base and
// says so; the snapshot is not written. With room again the next snapshot
// applies the same records again and is written, and a start from it is a
// full replay's state.
func TestIndexWriteFailsInsideASnapshot(t *testing.T) {
	g := &rig{dir: testenv.SmallTmpfs(t, 16<<20), every: 1 << 20}
	k, _ := g.open(t)
	n := index.MaxPendingEntries * 12 / 10 // ends: past one pending set
	calls(t, k.Journal(), 0, n)
	filler := testenv.FillDisk(t, filepath.Join(g.dir, "filler"))
	_, _, err := k.Snapshot()
	if err == nil || !strings.Contains(err.Error(), "the replica is made again from record 1 and the snapshot tried when next due") {
		t.Fatalf("a snapshot on the full disk: %v", err)
	}
	if des, _ := os.ReadDir(g.snapDir()); len(des) != 0 {
		t.Fatalf("the snapshot directory holds %d files after the failed snapshot", len(des))
	}
	t.Logf("on the full disk: %v", err)
	filler.Close()
	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	m, name, err := k.Snapshot()
	if err != nil || m.Seq != k.Journal().LastSeq() {
		t.Fatalf("the snapshot with room again: %q at %d, %v (journal at %d)", name, m.Seq, err, k.Journal().LastSeq())
	}
	g.close(t, k)
	k, op := g.open(t)
	defer g.close(t, k)
	if op.Snapshot != name || op.Replayed != 0 {
		t.Fatalf("open: snapshot %q, replayed %d; want %q, 0", op.Snapshot, op.Replayed, name)
	}
	sameAsFullReplay(t, g, op.State, g.x)
}
