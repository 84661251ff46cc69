package ledger

import (
	"bytes"
	"encoding/hex"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/wire/msg"
)

// newIndex opens a new history index in a temporary directory.
func newIndex(t testing.TB) *index.Index {
	t.Helper()
	x, err := index.Open(filepath.Join(t.TempDir(), "index", "history.db"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// entries is the requests bucket of x, key to value, both in hex.
func entries(t testing.TB, x *index.Index) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := x.Range(RequestsBucket, nil, func(k, v []byte) error {
		out[hex.EncodeToString(k)] = hex.EncodeToString(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// encode is l's snapshot encoding.
func encode(t testing.TB, l *Ledger) []byte {
	t.Helper()
	b, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replayAll applies recs to l.
func replayAll(t testing.TB, l *Ledger, recs []journal.Record) {
	t.Helper()
	for _, r := range recs {
		if err := l.Apply(r); err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
	}
}

// sameEntries fails unless the two indexes hold the same requests.
func sameEntries(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: the index holds %d requestIds, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: the index entry %s is %q, want %q", what, k, got[k], v)
		}
	}
}

// sameLedger fails unless got holds what want does, field for field (the
// index aside): not only what the encoding holds, so that a field the
// encoding forgot shows.
func sameLedger(t testing.TB, what string, got, want *Ledger) {
	t.Helper()
	type fgView struct {
		tool, attempt string
		result        []byte
		done          bool
	}
	view := func(l *Ledger) (map[string]entry, map[reqKey]reqEntry, map[string]fgView) {
		open, reqs, fg := map[string]entry{}, map[reqKey]reqEntry{}, map[string]fgView{}
		for id, e := range l.open {
			open[id] = *e
		}
		for k, q := range l.byReq {
			reqs[k] = *q
		}
		for id, f := range l.fg {
			v := fgView{tool: f.tool, attempt: f.attempt, result: f.result}
			select {
			case <-f.done:
				v.done = true
			default:
			}
			fg[id] = v
		}
		return open, reqs, fg
	}
	go1, gr, gf := view(got)
	wo, wr, wf := view(want)
	switch {
	case !reflect.DeepEqual(go1, wo):
		t.Fatalf("%s: the open attempts differ:\n got %+v\nwant %+v", what, go1, wo)
	case !reflect.DeepEqual(gr, wr):
		t.Fatalf("%s: the requestIds in memory differ:\n got %+v\nwant %+v", what, gr, wr)
	case !reflect.DeepEqual(gf, wf):
		t.Fatalf("%s: the foreground requests differ:\n got %+v\nwant %+v", what, gf, wf)
	case got.day != want.day || !reflect.DeepEqual(got.spent, want.spent):
		t.Fatalf("%s: the day's spending differs: %d %v, want %d %v", what, got.day, got.spent, want.day, want.spent)
	}
}

// journals are the controller journals the state tests replay: the golden
// ones of every version and the journal of every kind.
func journals(t *testing.T) map[string][]journal.Record {
	out := map[string][]journal.Record{"allkinds": records(t, allKindsJournal(t))}
	for _, v := range journaltest.Versions(t) {
		dir := filepath.Join(journaltest.CopyGolden(t, v, "controller"), "journal")
		j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		out[v] = records(t, j)
		j.Close()
	}
	return out
}

// TestStateIsReplay: a replayed ledger, encoded as a snapshot holds it and
// decoded, encodes alike and decides alike, with and without an index;
// with one, no requestId that ended is left in memory.
func TestStateIsReplay(t *testing.T) {
	for name, recs := range journals(t) {
		t.Run(name, func(t *testing.T) {
			for _, indexed := range []bool{false, true} {
				var x Index
				l := New()
				if indexed {
					xi := newIndex(t)
					x, l = xi, NewIndexed(xi)
				}
				replayAll(t, l, recs)
				b := encode(t, l)
				got, err := DecodeState(StateVersion, b, x)
				if err != nil {
					t.Fatal(err)
				}
				if again := encode(t, got); !bytes.Equal(again, b) {
					t.Fatalf("indexed %v: the decoded state encodes otherwise: %s", indexed, describe(again, b))
				}
				sameLedger(t, "indexed "+strconv.FormatBool(indexed), got, l)
				for _, q := range got.byReq {
					if indexed && q.endSeq != 0 {
						t.Fatalf("an ended requestId (attempt %s) is in memory after a replay with an index", q.attempt)
					}
				}
			}
		})
	}
}

// TestSnapshotAtEveryMark: at every record of a journal, the ledger its
// records so far replay to, taken as a snapshot (encoded, decoded) and
// then fed the records after it, is the ledger the whole journal replays
// to, and its index holds what the whole replay's does: without an index,
// with one, and with one already ahead of the snapshot (fed the whole
// journal before: the records after the mark are then met again, the same
// items, not duplicates).
func TestSnapshotAtEveryMark(t *testing.T) {
	for name, recs := range journals(t) {
		t.Run(name, func(t *testing.T) {
			plain := New()
			replayAll(t, plain, recs)
			wantPlain := encode(t, plain)
			wx := newIndex(t)
			whole := NewIndexed(wx)
			replayAll(t, whole, recs)
			want, wantIdx := encode(t, whole), entries(t, wx)
			if name == "allkinds" && (len(wantIdx) < 9 || len(whole.open) < 4 || len(whole.fg) < 2) {
				t.Fatalf("the journal of every kind leaves %d requestIds in the index, %d attempts open, %d foreground requests", len(wantIdx), len(whole.open), len(whole.fg))
			}
			for m := range len(recs) + 1 {
				at := "snapshot after record " + strconv.Itoa(m)
				// Without an index.
				p := New()
				replayAll(t, p, recs[:m])
				st, err := DecodeState(StateVersion, encode(t, p), nil)
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				replayAll(t, st, recs[m:])
				if got := encode(t, st); !bytes.Equal(got, wantPlain) {
					t.Fatalf("%s, no index: %s", at, describe(got, wantPlain))
				}
				sameLedger(t, at+", no index", st, plain)
				// With an index, fed from the mark on; and with one fed the
				// whole journal already.
				for _, ahead := range []bool{false, true} {
					x := newIndex(t)
					p := NewIndexed(x)
					replayAll(t, p, recs[:m])
					b := encode(t, p)
					if ahead {
						replayAll(t, NewIndexed(x), recs)
					}
					st, err := DecodeState(StateVersion, b, x)
					if err != nil {
						t.Fatalf("%s: %v", at, err)
					}
					replayAll(t, st, recs[m:])
					if got := encode(t, st); !bytes.Equal(got, want) {
						t.Fatalf("%s, index ahead %v: %s", at, ahead, describe(got, want))
					}
					sameLedger(t, at, st, whole)
					sameEntries(t, at, entries(t, x), wantIdx)
				}
			}
		})
	}
}

// TestEndedRequestLeavesMemory: with an index, a requestId that ended
// while the ledger ran stays in memory until Forget at or past its end,
// and then decides a call again from the index alone, with the place of
// its answer, which reads back as that very record.
func TestEndedRequestLeavesMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{}`), SegmentSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	x := newIndex(t)
	live := NewIndexed(x)
	replica := NewIndexed(x) // the keeper's: fed the durable records
	b := paidOn("a1", "r1", "x", 1)
	if _, ok := live.Begin(b); !ok {
		t.Fatal("begin refused")
	}
	bp, err := j.AppendAt(KindBegin, b)
	if err != nil {
		t.Fatal(err)
	}
	live.Journaled("a1", bp.Seq)
	res := Result{Attempt: "a1", Outcome: msg.StateDefinite, Status: 200, Body: []byte(`{"answer":42}`), Receipt: []byte{1}}
	rp, err := j.AppendAt(KindResult, res)
	if err != nil {
		t.Fatal(err)
	}
	live.Finish(res, rp)
	replayAll(t, replica, records(t, j)[1:]) // the bind record is the journal's
	if n := live.Forget(rp.Seq - 1); n != 0 {
		t.Fatalf("Forget before the answer dropped %d", n)
	}
	if _, reqs := live.Sizes(); reqs != 1 {
		t.Fatalf("%d requestIds in memory, want r1 until Forget", reqs)
	}
	if n := live.Forget(rp.Seq); n != 1 {
		t.Fatalf("Forget at the answer dropped %d, want 1", n)
	}
	if open, reqs := live.Sizes(); open != 0 || reqs != 0 {
		t.Fatalf("after Forget: %d open, %d requestIds in memory", open, reqs)
	}
	p, ok := live.Begin(paidOn("a2", "r1", "x", 1))
	if ok || p.Err != nil || p.Attempt != "a1" || p.State != msg.StateDefinite || !p.SameRequest || p.Answer != rp {
		t.Fatalf("decided from the index: %+v %v, want a1 definite at %+v", p, ok, rp)
	}
	rec, err := j.ReadAt(p.Answer)
	if err != nil || rec.Kind != KindResult {
		t.Fatalf("ReadAt %+v: %v %v", p.Answer, rec.Kind, err)
	}
	var back Result
	if err := Decode(rec, &back); err != nil || !bytes.Equal(back.Body, res.Body) {
		t.Fatalf("the answer read back: %+v %v", back, err)
	}
	if path, route, ok := live.Decided("agent1", "appliance", "r1"); !ok || path != b.Path || route != b.Route {
		t.Fatalf("Decided from the index: %q %q %v", path, route, ok)
	}
}

// TestRequestKeyUnambiguous: no two triples share a key.
func TestRequestKeyUnambiguous(t *testing.T) {
	seen := map[string][3]string{}
	for _, k := range [][3]string{{"a", "bc", "d"}, {"ab", "c", "d"}, {"a", "b", "cd"}, {"", "abc", "d"}, {"a\x01b", "c", "d"}, {"a", "\x01bc", "d"}} {
		key := string(RequestKey(k[0], k[1], k[2]))
		if other, ok := seen[key]; ok {
			t.Fatalf("%q and %q share key %x", k, other, key)
		}
		seen[key] = k
	}
}

// TestIndexUnreadable: a requestId the index cannot be asked about
// decides the call as refused (Prior.Err), registers nothing, and
// Decided says it decides nothing; a read-only ledger (Discard) refuses
// likewise, and a call without a requestId needs no index.
func TestIndexUnreadable(t *testing.T) {
	x := newIndex(t)
	l := NewIndexed(x)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	want := `ledger: reading requestId "r1" from the history index: index: closed`
	p, ok := l.Begin(paidOn("a1", "r1", "x", 1))
	if ok || p.Err == nil || p.Err.Error() != want || !errors.Is(p.Err, index.ErrClosed) {
		t.Fatalf("Begin with the index closed: %+v %v", p, ok)
	}
	if open, reqs := l.Sizes(); open != 0 || reqs != 0 {
		t.Fatalf("a refused Begin registered %d attempts, %d requestIds", open, reqs)
	}
	if _, _, ok := l.Decided("agent1", "appliance", "r1"); ok {
		t.Fatal("Decided with the index closed")
	}
	ro := NewIndexed(Discard())
	if p, ok := ro.Begin(paidOn("a1", "r1", "x", 1)); ok || !errors.Is(p.Err, ErrReadOnlyLedger) {
		t.Fatalf("Begin on a read-only ledger: %+v %v", p, ok)
	}
	if _, ok := l.Begin(paidOn("a2", "", "x", 1)); !ok {
		t.Fatal("a call without a requestId was refused")
	}
}
