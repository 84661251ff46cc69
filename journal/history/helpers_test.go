package history

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// The test owner: a ledger of tasks. "open" starts a task (body: its id),
// "end" ends an open one. The live state is the open tasks; an ended task
// is put into the index (bucket "ended", id -> the seqs of its open and
// end records) and dropped. Opening an id that is open, or that the index
// holds as opened by another record, is refused, as an owner's replay
// refuses a duplicate attempt; one the index holds as opened by this very
// record is this record replayed again (the index is ahead of the
// snapshot replayed from) and goes on as the first time.
const (
	testFormat = "history-test-state"
	kindOpen   = "open"
	kindEnd    = "end"
	bucket     = "ended"
)

type tasks struct {
	x     *index.Index         // nil: ended tasks stay in Ended
	Open  map[string]uint64    `cbor:"open"`  // id -> seq of its open record
	Ended map[string][2]uint64 `cbor:"ended"` // without an index: id -> seqs of its open and end
	Count uint64               `cbor:"count"` // tasks ended
	Binds uint64               `cbor:"binds"` // the journal's own records seen
}

var det = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

func newTasks(x *index.Index) *tasks {
	return &tasks{x: x, Open: map[string]uint64{}, Ended: map[string][2]uint64{}}
}

func (t *tasks) Encode() ([]byte, error) { return det.Marshal(t) }

func (t *tasks) Apply(r journal.Record) error {
	var id string
	switch r.Kind {
	case kindOpen, kindEnd:
		if err := cbor.Unmarshal(r.Body, &id); err != nil {
			return err
		}
	default:
		t.Binds++
		return nil
	}
	if r.Kind == kindOpen {
		if _, ok := t.Open[id]; ok {
			return fmt.Errorf("task %s is already open", id)
		}
		if seqs, ok, err := t.ended(id); err != nil {
			return err
		} else if ok && seqs[0] != r.Seq {
			return fmt.Errorf("task %s was opened at record %d and ended at %d", id, seqs[0], seqs[1])
		}
		t.Open[id] = r.Seq
		return nil
	}
	if _, ok := t.Open[id]; !ok {
		return fmt.Errorf("task %s is not open", id)
	}
	seqs := [2]uint64{t.Open[id], r.Seq}
	delete(t.Open, id)
	t.Count++
	if t.x == nil {
		t.Ended[id] = seqs
		return nil
	}
	return t.x.Put(bucket, []byte(id), append(index.SeqKey(seqs[0]), index.SeqKey(seqs[1])...))
}

func (t *tasks) ended(id string) ([2]uint64, bool, error) {
	if t.x == nil {
		seqs, ok := t.Ended[id]
		return seqs, ok, nil
	}
	b, ok, err := t.x.Get(bucket, []byte(id))
	if err != nil || !ok {
		return [2]uint64{}, false, err
	}
	if len(b) != 16 {
		return [2]uint64{}, false, fmt.Errorf("index entry of task %s: %d bytes", id, len(b))
	}
	opened, err := index.KeySeq(b[:8])
	if err != nil {
		return [2]uint64{}, false, err
	}
	ended, err := index.KeySeq(b[8:])
	return [2]uint64{opened, ended}, true, err
}

// rig is one owner's directories.
type rig struct {
	dir   string
	x     *index.Index
	every uint64
}

func newRig(t *testing.T, every uint64) *rig {
	return &rig{dir: t.TempDir(), every: every}
}

func (g *rig) journalDir() string { return filepath.Join(g.dir, "journal") }
func (g *rig) snapDir() string    { return filepath.Join(g.dir, "snapshots") }
func (g *rig) indexPath() string  { return filepath.Join(g.dir, "index", "history.db") }

func (g *rig) options(t testing.TB, x *index.Index) Options {
	return Options{
		Journal:        g.journalDir(),
		JournalOptions: journal.Options{Owner: "history-test", Format: "history-test-v1", SegmentSize: 64 << 10, Logger: quiet()},
		Snapshots:      g.snapDir(), Format: testFormat, Version: 1, Index: x,
		New: func() (State, error) { return newTasks(x), nil },
		Decode: func(s snapshot.Snapshot) (State, error) {
			if s.Version != 1 {
				return nil, fmt.Errorf("version %d", s.Version)
			}
			st := newTasks(x)
			if err := cbor.Unmarshal(s.State, st); err != nil {
				return nil, err
			}
			return st, nil
		},
		Every: g.every, Logger: quiet(),
	}
}

// open opens the rig's index and keeper.
func (g *rig) open(t testing.TB) (*Keeper, Opened) {
	t.Helper()
	x, err := index.Open(g.indexPath(), index.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	g.x = x
	k, op, err := Open(g.options(t, x))
	if err != nil {
		x.Close()
		t.Fatalf("%v (rejected: %s)", err, rejectedReasons(op))
	}
	return k, op
}

// close closes the keeper (a last snapshot) and the index.
func (g *rig) close(t testing.TB, k *Keeper) {
	t.Helper()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.x.Close(); err != nil {
		t.Fatal(err)
	}
}

// calls appends n tasks, opened and ended, from task number from, and
// one more opened and left open for every tenth.
func calls(t testing.TB, j *journal.Journal, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("t%06d", i)
		if _, err := j.Append(kindOpen, id); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			continue
		}
		if _, err := j.Append(kindEnd, id); err != nil {
			t.Fatal(err)
		}
	}
}

// fullReplay is the state a full replay of the rig's journal gives, with
// no snapshot and no index: every ended task in memory.
func (g *rig) fullReplay(t testing.TB) *tasks {
	t.Helper()
	st := newTasks(nil)
	j, err := journal.Open(g.journalDir(), journal.Options{ReadOnly: true, OnRecord: st.Apply, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	return st
}

// sameAsFullReplay checks that live (and the index beside it) is what a
// full replay gives: the same open tasks and count, and every ended task
// in the index at the seq the full replay ended it.
func sameAsFullReplay(t testing.TB, g *rig, live State, x *index.Index) {
	t.Helper()
	full := g.fullReplay(t)
	got := live.(*tasks)
	if fmt.Sprint(got.Open) != fmt.Sprint(full.Open) || got.Count != full.Count {
		t.Fatalf("live state: %d open, %d ended; full replay: %d open, %d ended", len(got.Open), got.Count, len(full.Open), full.Count)
	}
	if got.Binds != full.Binds {
		t.Fatalf("live state saw %d bind records, a full replay %d", got.Binds, full.Binds)
	}
	for id, seqs := range full.Ended {
		b, ok, err := x.Get(bucket, []byte(id))
		if err != nil || !ok || !bytes.Equal(b, append(index.SeqKey(seqs[0]), index.SeqKey(seqs[1])...)) {
			t.Fatalf("index entry of ended task %s: %x %v %v, want seqs %v", id, b, ok, err, seqs)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// rejectedReasons is op's rejections, one line each.
func rejectedReasons(op Opened) string {
	var b strings.Builder
	for _, r := range op.Rejected {
		fmt.Fprintf(&b, "%s: %s\n", r.Name, r.Reason)
	}
	return b.String()
}

func isRejected(op Opened, target error) bool {
	for _, r := range op.Rejected {
		if errors.Is(r.Err, target) {
			return true
		}
	}
	return false
}
