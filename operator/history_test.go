package operator

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestHistoryAtEveryMark: at every record of a journal, the state its
// records so far replay to with a history index (what ended put into the
// index and dropped), taken as a snapshot and fed the records after it,
// is the state a full replay without an index gives, less what ended; and
// the index holds what ended, as the full replay has it. One index serves
// every mark, so from the second mark on the replay meets what the index
// holds from the very records it replays (as after a crash between the
// index's sync and a snapshot's rename): over the golden journals of
// every version and testdata/allkinds, which holds every kind.
func TestHistoryAtEveryMark(t *testing.T) {
	for name, dir := range everyJournal(t) {
		t.Run(name, func(t *testing.T) {
			full, recs := replayAll(t, dir)
			x, err := hosthist.OpenIndex(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			want := swept(t, full.st)
			for m := range recs {
				prefix := &replayer{st: newState(), pub: full.pub}
				prefix.st.hist = x
				for _, r := range recs[:m+1] {
					if err := prefix.record(r); err != nil {
						t.Fatalf("prefix to record %d, record %d: %v", m+1, r.Seq, err)
					}
				}
				b, err := encodeState(prefix.st)
				if err != nil {
					t.Fatal(err)
				}
				st, err := decodeState(b)
				if err != nil {
					t.Fatalf("after record %d: %v", m+1, err)
				}
				st.hist = x
				rest := &replayer{st: st, pub: full.pub}
				for _, r := range recs[m+1:] {
					if err := rest.record(r); err != nil {
						t.Fatalf("snapshot after record %d, then record %d: %v", m+1, r.Seq, err)
					}
				}
				if err := st.settle(); err != nil {
					t.Fatal(err)
				}
				if !sameState(st, want) {
					t.Fatalf("snapshot after record %d, then the rest: the state differs from the full replay's, less what ended:\n got %+v\nwant %+v", m+1, *st, *want)
				}
			}
			wantInIndex(t, full.st, x)
		})
	}
}

// everyJournal is a copy of testdata/allkinds and of each golden host
// journal, by name.
func everyJournal(t *testing.T) map[string]string {
	dirs := map[string]string{"allkinds": journaltest.CopyDir(t, filepath.Join("testdata", "allkinds"))}
	for _, v := range journaltest.Versions(t) {
		dirs[v] = journaltest.CopyGolden(t, v, "host")
	}
	return dirs
}

// replayAll is a full replay of the store in dir without an index
// (read-only, no index file: everything in memory), and its records.
func replayAll(t *testing.T, dir string) (*Store, []journal.Record) {
	t.Helper()
	s, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.st.hist != nil {
		t.Fatal("a store without an index file has one")
	}
	var recs []journal.Record
	if err := s.j.Iterate(1, func(r journal.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return s, recs
}

// swept is a copy of st less what a replay with an index puts into it:
// the attempts that ended (counted in Forgotten), their decided asks and
// the ask events.
func swept(t *testing.T, st *state) *state {
	t.Helper()
	b, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range c.Attempts {
		if !a.ended() {
			continue
		}
		delete(c.Attempts, id)
		c.Forgotten[a.State]++
		if k := c.askByAttempt[id]; k != nil && k.State != msg.AskPending {
			c.dropAsk(k)
		}
	}
	c.AskEvents = nil
	c.SignedSeq, c.SignedHead = c.DurableSeq, c.DurableHead
	return c
}

// sameState compares two states but for the index they use, the ask
// signal, and an empty list of events against none.
func sameState(a, b *state) bool {
	ac, bc := *a, *b
	ac.hist, bc.hist = nil, nil
	ac.askSignal, bc.askSignal = nil, nil
	if len(ac.AskEvents) == 0 {
		ac.AskEvents = nil
	}
	if len(bc.AskEvents) == 0 {
		bc.AskEvents = nil
	}
	return reflect.DeepEqual(&ac, &bc)
}

// wantInIndex checks that x holds what ended in the full replay's state
// full, as full has it: every ended attempt, its decided ask, every ask
// event, and the latest of each in order.
func wantInIndex(t *testing.T, full *state, x *hosthist.Index) {
	t.Helper()
	ended := 0
	for id, a := range full.Attempts {
		if !a.ended() {
			continue
		}
		ended++
		var got attempt
		if ok, err := x.Attempt(id, &got); err != nil || !ok || !reflect.DeepEqual(&got, a) {
			t.Fatalf("attempt %s in the index: %v %v\n got %+v\nwant %+v", id, ok, err, got, *a)
		}
		if k := full.askByAttempt[id]; k != nil {
			var gk ask
			if ok, err := x.Ask(k.ID, &gk); err != nil || !ok || !reflect.DeepEqual(&gk, k) {
				t.Fatalf("ask %s in the index: %v %v", k.ID, ok, err)
			}
		}
	}
	var evs []views.AskEvent
	if err := x.Events(0, len(full.AskEvents)+1, func() any { evs = append(evs, views.AskEvent{}); return &evs[len(evs)-1] }); err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(full.AskEvents) || len(evs) != 0 && !reflect.DeepEqual(evs, full.AskEvents) {
		t.Fatalf("ask events in the index: %d, want %d", len(evs), len(full.AskEvents))
	}
	var past []*attempt
	if err := x.LatestAttempts(ended+1, func() any { a := new(attempt); past = append(past, a); return a }); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(past); i++ {
		if past[i-1].First >= past[i].First {
			t.Fatalf("the index's attempts out of order: %d before %d", past[i-1].First, past[i].First)
		}
	}
	if len(past) != ended {
		t.Fatalf("the index lists %d attempts, the full replay ended %d", len(past), ended)
	}
	t.Logf("%d ended attempts, %d ask events in the index", ended, len(evs))
}
