package ledger

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// The journal of every kind: a generator of a controller journal holding
// every record kind the ledger's replay knows (KindNames, its own table),
// in the transitions a controller writes them in, and the journal's own
// rebind. TestAllKindsJournal fails when a kind is added to the table and
// not here.

// kindSteps writes, per kind, the records that show it; each appends to j
// through add. The map's keys must be exactly KindNames().
var kindSteps = map[string]func(add func(kind string, body any)){
	KindBegin: func(add func(string, any)) {
		add(KindBegin, paidOn("k-begin", "r-begin", "x", 100)) // no end: uncertain
		b := begin("k-disc", "", "list")                       // a discovery: no requestId
		b.Kind = msg.KindList
		add(KindBegin, b)
		legacy := begin("k-legacy", "r-legacy", "x") // before agents: principal only, unscoped
		legacy.Principal = "uid:1000"
		add(KindBegin, legacy)
		add(KindResult, Result{Attempt: "k-legacy", Outcome: msg.StateDefinite, Status: 200, Body: []byte(`{"old":1}`), Receipt: []byte{7}, Charge: 1})
	},
	KindResult: func(add func(string, any)) {
		add(KindBegin, paidOn("k-ref", "r-res", "x", 100))
		add(KindResult, Result{Attempt: "k-ref", Outcome: msg.StateRefused, Status: 403, Refusal: &msg.Refusal{Code: "denied", Reason: "no"}})
		add(KindBegin, paidOn("k-def", "r-res", "x", 100)) // the refused one decides nothing: a new attempt
		add(KindResult, Result{Attempt: "k-def", Outcome: msg.StateDefinite, Status: 200, Body: []byte(`{"ok":true}`), Receipt: []byte{1, 2}, Charge: 4, Consented: 5})
		add(KindBegin, paidOn("k-ns", "r-ns", "x", 100))
		add(KindResult, Result{Attempt: "k-ns", Outcome: msg.StateNotSent, Consented: 5})
		add(KindBegin, paidOn("k-unc", "r-unc", "x", 100))
		add(KindResult, Result{Attempt: "k-unc", Outcome: msg.StateUncertain, Detail: "lost"})
		add(KindBegin, paidOn("k-unc2", "r-unc2", "x", 100))
		add(KindResult, Result{Attempt: "k-unc2", Outcome: msg.StateUncertain, Detail: "lost", Consented: 5}) // consent known: never abandoned on not-seen
		add(KindResult, Result{Attempt: "nobody", Outcome: msg.StateDefinite})                                // of no open attempt: nothing
	},
	KindResolve: func(add func(string, any)) {
		add(KindBegin, paidOn("k-r1", "r-r1", "x", 100))
		add(KindResult, Result{Attempt: "k-r1", Outcome: msg.StateUncertain})
		add(KindResolve, Resolve{Attempt: "k-r1", State: msg.StateDefinite, By: "cli", Status: 200, Body: []byte(`{"v":1}`), Receipt: []byte{3}, Charge: 2})
	},
	KindResolveV2: func(add func(string, any)) {
		add(KindBegin, paidOn("k-rel", "r-rel", "x", 100))
		add(KindResolveV2, ResolveV2{Attempt: "k-rel", State: msg.StateReleased, By: "cli", Receipt: []byte{4}, ResolvedBy: "uid:0", Reason: "not done"})
		add(KindBegin, paidOn("k-perf", "r-perf", "x", 100))
		add(KindResolveV2, ResolveV2{Attempt: "k-perf", State: msg.StatePerformed, By: "cli", Receipt: []byte{5}, Charge: 6, ResolvedBy: "uid:0", Reason: "done"})
		add(KindBegin, paidOn("k-ab", "r-ab", "x", 100))
		add(KindResolveV2, ResolveV2{Attempt: "k-ab", State: msg.StateAbandoned, By: "cli"})
		add(KindBegin, paidOn("k-ab2", "r-ab", "y", 100)) // abandoned decides nothing either
	},
	KindAwaiting: func(add func(string, any)) {
		add(KindBegin, paidOn("k-aw", "r-aw", "x", 100))
		add(KindAwaiting, Awaiting{Attempt: "k-aw", Ask: "ask-aaaaaaaaaaaa", ExpiresAt: 1})
		// A denial: it decides its requestId for good (denial.go).
		add(KindBegin, paidOn("k-dn", "r-dn", "x", 100))
		add(KindAwaiting, Awaiting{Attempt: "k-dn", Ask: "ask-dddddddddddd", ExpiresAt: 1})
		add(KindResult, Result{Attempt: "k-dn", Outcome: msg.StateRefused, Receipt: []byte{9},
			Refusal: &msg.Refusal{Code: msg.CodeDenied, Reason: "denied"}, Ask: "ask-dddddddddddd", AnsweredBy: "uid:1001"})
	},
	KindConsented: func(add func(string, any)) {
		add(KindBegin, paidOn("k-c1", "r-c1", "x", 100))
		add(KindAwaiting, Awaiting{Attempt: "k-c1", Ask: "ask-bbbbbbbbbbbb", ExpiresAt: 1})
		add(KindConsented, Consented{Attempt: "k-c1", ConsentSHA256: make([]byte, 32), Amount: 7}) // no result: uncertain
		add(KindBegin, paidOn("k-c2", "r-c2", "x", 100))
		add(KindAwaiting, Awaiting{Attempt: "k-c2", Ask: "ask-cccccccccccc", ExpiresAt: 1})
		add(KindConsented, Consented{Attempt: "k-c2", ConsentSHA256: make([]byte, 32), Amount: 9})
		add(KindResult, Result{Attempt: "k-c2", Outcome: msg.StateDefinite, Status: 200, Receipt: []byte{6}, Charge: 3, Consented: 9,
			Ask: "ask-cccccccccccc", AnsweredBy: "uid:1001"})
	},
	KindClockAccept: func(add func(string, any)) {
		add(KindBegin, paidOn("k-fwd", "r-fwd", "x", 400)) // a clock set forward: no result, uncertain
		add(KindClockAccept, ClockAccept{Day: 100, Was: 400})
	},
	KindFgSubmit: func(add func(string, any)) {
		add(KindFgSubmit, FgSubmit{ID: "fg-1", Tool: "oracle_call", Arguments: []byte(`{}`)})
		b := paidOn("k-fg", "r-fg", "x", 101) // a new day: the spending starts again
		b.Foreground = "fg-1"
		add(KindBegin, b)
		add(KindResult, Result{Attempt: "k-fg", Outcome: msg.StateDefinite, Status: 200, Receipt: []byte{8}, Charge: 1})
		add(KindFgSubmit, FgSubmit{ID: "fg-2", Tool: "oracle_call", Arguments: []byte(`{}`)}) // interrupted
	},
	KindFgResult: func(add func(string, any)) {
		add(KindFgResult, FgResult{ID: "fg-1", Result: []byte(`{"outcome":"definite"}`)})
	},
	KindFgAck: func(add func(string, any)) {
		add(KindFgSubmit, FgSubmit{ID: "fg-3", Tool: "oracle_call", Arguments: []byte(`{}`)})
		add(KindFgResult, FgResult{ID: "fg-3", Result: []byte(`{}`)})
		add(KindFgAck, FgAck{ID: "fg-3"})
	},
}

// paidOn is a begin of agent1's, counted on day.
func paidOn(id, reqID, body string, day int64) Begin {
	b := begin(id, reqID, body)
	b.Agent, b.Principal, b.Day = "agent1", "agent1", day
	return b
}

// allKindsJournal writes the journal of every kind in a new directory,
// in small segments (so that places span several), and returns it open.
func allKindsJournal(t testing.TB) *journal.Journal {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{}`), SegmentSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	add := func(kind string, body any) {
		t.Helper()
		if _, err := j.Append(kind, body); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	for _, k := range KindNames() {
		step := kindSteps[k]
		if step == nil {
			t.Fatalf("the ledger replays kind %q, and the journal of every kind writes none: add it to kindSteps", k)
		}
		step(add)
		if k == KindResult {
			if _, err := j.Rebind([]byte(`{"rebound":true}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return j
}

// TestAllKindsJournal: the generator covers exactly the kinds the ledger's
// replay knows, and the journal it writes holds each of them.
func TestAllKindsJournal(t *testing.T) {
	for k := range kindSteps {
		if decoders[k] == nil {
			t.Errorf("kindSteps writes %q, which the ledger does not replay", k)
		}
	}
	j := allKindsJournal(t)
	seen := map[string]int{}
	if err := j.Iterate(1, func(r journal.Record) error { seen[r.Kind]++; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(KindNames(), "bind", "rebind") {
		if seen[k] == 0 {
			t.Errorf("the journal of every kind holds no %s record", k)
		}
	}
	if len(j.Summary().Segments) < 3 {
		t.Errorf("%d segments; the journal of every kind should span several", len(j.Summary().Segments))
	}
}

// TestUnknownKindRefused: a kind the ledger does not know is refused by
// name (a newer controller wrote it), not skipped.
func TestUnknownKindRefused(t *testing.T) {
	err := New().Apply(journal.Record{Seq: 7, Kind: "begin.v9", Body: []byte{0xa0}})
	want := `journal record 7 has kind "begin.v9", which this controller's ledger does not know (written by a newer controller?)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if err := New().Apply(journal.Record{Seq: 1, Kind: "bind", Body: []byte{0xa0}}); err != nil {
		t.Fatalf("the journal's bind record: %v", err)
	}
}

// records reads every record of j.
func records(t testing.TB, j *journal.Journal) []journal.Record {
	t.Helper()
	var recs []journal.Record
	if err := j.Iterate(1, func(r journal.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// describe is a short form of a ledger's encoding difference, for a
// failure message.
func describe(a, b []byte) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if bytes.Equal(a, b) {
		return "equal"
	}
	return fmt.Sprintf("%d and %d bytes, first difference at byte %d", len(a), len(b), n)
}
