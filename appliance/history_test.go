package appliance

import (
	"bytes"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/journal/snapshot"
)

// TestEveryKindIsGenerated: the generator knows every kind the replay's
// decoder table does, and a generated journal holds each of them, so
// that the tests over it cover a kind as soon as the decoder has one.
func TestEveryKindIsGenerated(t *testing.T) {
	kinds, gens := slices.Sorted(maps.Keys(recordKinds)), slices.Sorted(maps.Keys(generators))
	if !slices.Equal(kinds, gens) {
		t.Fatalf("the decoder knows kinds %v, the generator %v", kinds, gens)
	}
	state := generatedState(t, 20)
	seen := map[string]bool{}
	j, err := journal.Open(journalDir(state), journal.Options{ReadOnly: true, Logger: quietLogger(t),
		OnRecord: func(r journal.Record) error { seen[r.Kind] = true; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, kinds) {
		t.Fatalf("the generated journal holds kinds %v, want %v", got, kinds)
	}
}

// generatedState is a state directory whose journal the appliance wrote:
// calls answers and every other kind among them, then a clean stop (its
// snapshot).
func generatedState(t testing.TB, calls int) string {
	a := startApp(t, Config{})
	genAllKinds(t, a.srv, calls)
	a.close()
	return a.state
}

// A start from the snapshot of a clean stop replays nothing and is what a
// full replay gives; the oldest request id then answers byte for byte as
// before the stop, from the index and the journal, and so it does after a
// snapshot while running, after a full replay with the index (the
// snapshots gone) and after a full rebuild (the index gone too).
func TestSnapshotStartIsFullReplay(t *testing.T) {
	a := startApp(t, Config{})
	genAllKinds(t, a.srv, 40)
	oldest, body := callBody(0), []byte(nil)
	status, first := a.invokeBody(oldest)
	if status != 200 {
		t.Fatalf("oldest call: %d %s", status, first)
	}
	if a.srv.ledger.held() != 40 {
		t.Fatalf("%d answers in memory before any snapshot, want 40", a.srv.ledger.held())
	}
	// A snapshot while running: the answers leave memory.
	if _, err := a.srv.store.snapshot(); err != nil {
		t.Fatal(err)
	}
	if n := a.srv.ledger.held(); n != 0 {
		t.Fatalf("%d answers in memory after a snapshot", n)
	}
	if status, body = a.invokeBody(oldest); status != 200 || !bytes.Equal(body, first) {
		t.Fatalf("after a snapshot: %d %s, first %s", status, body, first)
	}
	genCalls(t, a.srv, 40, 10, 4)
	state := a.state
	a.close()

	for _, c := range []struct {
		name   string
		remove []string
		from   string // the snapshot the start uses, "" for a full replay
	}{
		{"restart from the last snapshot", nil, "last"},
		{"full replay, the index kept", []string{snapshotDir(state)}, ""},
		{"full rebuild, no snapshot, no index", []string{snapshotDir(state), filepath.Dir(indexPath(state))}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, d := range c.remove {
				if err := os.RemoveAll(d); err != nil {
					t.Fatal(err)
				}
			}
			a := startApp(t, Config{State: state})
			defer a.close()
			st := a.srv.store
			if c.from == "last" && (st.opened.Seq != st.j.LastSeq() || st.j.LastSeq() == 0) {
				t.Fatalf("opened at %d, the journal ends at %d", st.opened.Seq, st.j.LastSeq())
			}
			sameAsFull(t, state, st.opened, st.x)
			if status, body := a.invokeBody(oldest); status != 200 || !bytes.Equal(body, first) {
				t.Fatalf("oldest: %d %s, first %s", status, body, first)
			}
			other := oldest
			other.ConversationID = "another"
			if status, _ := a.invokeBody(other); status != http.StatusConflict {
				t.Fatalf("another body under the oldest id: %d", status)
			}
		})
	}
}

// TestSnapshotAtEveryMark: over the golden journals and a generated one,
// a replay of the first m records into an index, encoded and decoded as
// a snapshot, then the rest replayed onto it, is the whole replay, for
// every m; and so it is when the index is ahead of the snapshot (the
// records up to m+k already in it, as after a crash between the index's
// sync and the snapshot's rename).
func TestSnapshotAtEveryMark(t *testing.T) {
	states := map[string]string{"generated": generatedState(t, 30)}
	for _, v := range journaltest.Versions(t) {
		states[v] = journaltest.CopyGolden(t, v, "appliance")
	}
	for name, state := range states {
		t.Run(name, func(t *testing.T) {
			recs := journalRecords(t, state)
			whole := fullReplay(t, state)
			for m := 1; m <= len(recs); m++ {
				for _, ahead := range []int{0, 1, 3} {
					checkSnapshotAt(t, recs, m, min(m+ahead, len(recs)), whole)
				}
			}
		})
	}
}

// checkSnapshotAt replays recs up to m into a new index, and on to ahead
// into the index only, makes the snapshot at m, replays the rest onto
// it and compares with whole.
func checkSnapshotAt(t *testing.T, recs []journal.Record, m, ahead int, whole *replayState) {
	t.Helper()
	x, err := index.Open(filepath.Join(t.TempDir(), "index", "answers.db"), index.Options{Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	prefix := newReplayState(x, "test", nil)
	for _, r := range recs[:m] {
		if err := prefix.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	b, err := prefix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	past := newReplayState(x, "test", nil)
	past.wire = prefix.wire
	for _, r := range recs[m:ahead] {
		if err := past.Apply(r); err != nil {
			t.Fatalf("ahead of %d, record %d: %v", m, r.Seq, err)
		}
	}
	st, err := decodeReplayState(snapshot.Snapshot{Format: stateFormat, Version: stateVersion, Mark: journal.Mark{Seq: uint64(m)}, State: b}, x, "test", nil)
	if err != nil {
		t.Fatalf("the snapshot after record %d: %v", m, err)
	}
	for _, r := range recs[m:] {
		if err := st.Apply(r); err != nil {
			t.Fatalf("the snapshot after record %d (index at %d), then record %d: %v", m, ahead, r.Seq, err)
		}
	}
	if st.wire.Seq != whole.Seq || st.Answers != whole.Answers || !bytes.Equal(st.Origin, whole.Origin) {
		t.Fatalf("the snapshot after record %d, then the rest: %+v; the whole replay: %+v", m, st.wire, whole.wire)
	}
	sameEntries(t, whole.all, x)
}

// journalRecords is every record of the journal of state.
func journalRecords(t *testing.T, state string) []journal.Record {
	t.Helper()
	var recs []journal.Record
	j, err := journal.Open(journalDir(state), journal.Options{ReadOnly: true, Logger: quietLogger(t),
		OnRecord: func(r journal.Record) error { recs = append(recs, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	return recs
}
