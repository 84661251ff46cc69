package ledger

import (
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

func begin(id, reqID, body string) Begin {
	h := sha256.Sum256([]byte(body))
	return Begin{Attempt: id, Tool: "oracle_call", Application: "appliance", Operation: "op", RequestID: reqID,
		Kind: msg.KindInvoke, Method: "POST", Path: "/v1/invoke", Body: []byte(body), RequestSHA256: h[:], Route: "r"}
}

// TestBeginDecides: the latest attempt of a requestId decides a new call
// while it is definite, pending or uncertain; once it ended without
// reaching the application, a new attempt begins; Abort puts back the
// attempt a failed begin replaced.
func TestBeginDecides(t *testing.T) {
	l := New()
	if _, ok := l.Begin(begin("a1", "r1", "x")); !ok {
		t.Fatal("first begin refused")
	}
	if p, ok := l.Begin(begin("a2", "r1", "x")); ok || p.Attempt != "a1" || p.State != msg.StatePending || !p.SameRequest {
		t.Fatalf("while a1 is in flight: %+v %v", p, ok)
	}
	l.Finish(Result{Attempt: "a1", Outcome: msg.StateRefused}, at(2))
	if _, ok := l.Begin(begin("a3", "r1", "y")); !ok {
		t.Fatal("a refused attempt blocks its requestId")
	}
	l.Abort("a3") // its begin could not be journaled
	if _, _, open := l.Open("a3"); open {
		t.Fatal("an aborted attempt is still open")
	}
	if _, ok := l.Begin(begin("a4", "r1", "x")); !ok {
		t.Fatal("after the abort, r1 should point at the refused a1 again")
	}
	l.Finish(Result{Attempt: "a4", Outcome: msg.StateDefinite, Status: 200}, at(7))
	p, ok := l.Begin(begin("a5", "r1", "x"))
	if ok || p.Attempt != "a4" || p.State != msg.StateDefinite || !p.SameRequest || p.Answer.Seq != 7 {
		t.Fatalf("after a definite answer: %+v %v", p, ok)
	}
	if p, ok := l.Begin(begin("a6", "r1", "z")); ok || p.SameRequest {
		t.Fatalf("other arguments: %+v %v", p, ok)
	}
	l.Begin(begin("a7", "r2", "x"))
	l.Unfinished("a7", "the result could not be journaled")
	if p, ok := l.Begin(begin("a8", "r2", "x")); ok || p.State != msg.StateUncertain {
		t.Fatalf("after an unjournaled result: %+v %v", p, ok)
	}
	if u := l.UncertainAttempts(); len(u) != 1 || u[0].ID != "a7" || u[0].Detail != "the result could not be journaled" {
		t.Fatalf("uncertain %+v", u)
	}
	l.Resolved(ResolveV2{Attempt: "a7", State: msg.StateAbandoned, By: "test"}, at(9))
	if _, ok := l.Begin(begin("a9", "r2", "x")); !ok {
		t.Fatal("an abandoned attempt blocks its requestId")
	}
	if u := New().UncertainAttempts(); u == nil || len(u) != 0 {
		t.Fatalf("no uncertain attempts: %#v, want an empty list", u)
	}
}

// TestConsentOnce: one consent per live attempt, for exactly its begin;
// an attempt found in the journal at start is never consented to.
func TestConsentOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := begin("old", "r0", "x")
	if _, err := j.Append(KindBegin, b); err != nil {
		t.Fatal(err)
	}
	l := New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	j.Close()
	reserve := func(b Begin) msg.Reserve {
		return msg.Reserve{Attempt: b.Attempt, Controller: "dev", Application: b.Application, Operation: b.Operation, RequestSHA256: b.RequestSHA256, Charge: 1}
	}
	code := func(err error) string {
		var r *msg.Refusal
		if !errors.As(err, &r) {
			t.Fatalf("refusal %v is not a *msg.Refusal", err)
		}
		return r.Code
	}
	if err := l.Consent(reserve(b), "dev", nil); code(err) != msg.CodeNoConsent || err.Error() != "no-consent: attempt old predates this controller process and is pending inspection" {
		t.Fatalf("attempt from before the restart: %v", err)
	}
	live := begin("a1", "r1", "x")
	l.Begin(live)
	wrong := reserve(live)
	wrong.Operation = "other"
	if err := l.Consent(wrong, "dev", nil); code(err) != msg.CodeNoConsent {
		t.Fatalf("another operation: %v", err)
	}
	if err := l.Consent(reserve(live), "other", nil); code(err) != msg.CodeNoConsent {
		t.Fatalf("another controller: %v", err)
	}
	if err := l.Consent(reserve(live), "dev", nil); err != nil {
		t.Fatalf("consent: %v", err)
	}
	if err := l.Consent(reserve(live), "dev", nil); code(err) != msg.CodeDuplicate {
		t.Fatalf("second consent: %v", err)
	}
	if err := l.Consent(reserve(begin("nope", "", "x")), "dev", nil); code(err) != msg.CodeUnknown {
		t.Fatalf("unknown attempt: %v", err)
	}
}

// TestForegroundRequests: running, done, interrupted and acknowledged.
func TestForegroundRequests(t *testing.T) {
	l := New()
	l.FgStart("f1", "oracle_call")
	if st, err := l.FgLookup("f1"); err != nil || !st.Running {
		t.Fatalf("running: %+v %v", st, err)
	}
	b := begin("a1", "r1", "x")
	b.Foreground = "f1"
	l.Begin(b)
	l.FgEnd("f1", nil)
	if st, err := l.FgLookup("f1"); err != nil || st.Running || st.Result != nil || st.Attempt != "a1" {
		t.Fatalf("interrupted: %+v %v", st, err)
	}
	l.FgStart("f2", "oracle_call")
	l.FgEnd("f2", []byte(`{}`))
	if st, err := l.FgLookup("f2"); err != nil || string(st.Result) != "{}" {
		t.Fatalf("done: %+v %v", st, err)
	}
	l.FgAcked("f2")
	if _, err := l.FgLookup("f2"); err == nil || err.Error() != `no foreground request "f2" awaits acknowledgement` {
		t.Fatalf("after ack: %v", err)
	}
}

// TestSpending: what Replay says of the latest day: receipts count their
// charge, results without one what was consented, an uncertain result and
// a begin without a result count as unsettled, resolutions their charge;
// an earlier day and begins that name no principal count for nothing.
func TestSpending(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	add := func(kind string, v any) {
		t.Helper()
		if _, err := j.Append(kind, v); err != nil {
			t.Fatal(err)
		}
	}
	at := func(id, principal string, day int64) Begin {
		b := begin(id, "", "x")
		b.Principal, b.Day = principal, day
		return b
	}
	add(KindBegin, at("y1", "uid:1", 9))
	add(KindResult, Result{Attempt: "y1", Outcome: msg.StateDefinite, Receipt: []byte{1}, Charge: 50})
	add(KindBegin, at("old", "", 0)) // written before the payer: counts for nobody
	add(KindBegin, at("a1", "uid:1", 10))
	add(KindResult, Result{Attempt: "a1", Outcome: msg.StateDefinite, Receipt: []byte{1}, Charge: 3, Consented: 5})
	add(KindBegin, at("a2", "uid:1", 10))
	add(KindResult, Result{Attempt: "a2", Outcome: msg.StateNotSent, Consented: 5})
	add(KindBegin, at("a3", "uid:1", 10))
	add(KindResult, Result{Attempt: "a3", Outcome: msg.StateUncertain, Consented: 5})
	add(KindBegin, at("a4", "uid:1", 10)) // no result
	add(KindBegin, at("f1", "foreground", 10))
	add(KindResult, Result{Attempt: "f1", Outcome: msg.StateUncertain})
	add(KindResolve, Resolve{Attempt: "f1", State: msg.StateDefinite, By: "test", Receipt: []byte{1}, Charge: 7})
	l := New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	day, spent, unsettled := l.Spending()
	if day != 10 || len(spent) != 2 || spent["uid:1"] != 8 || spent["foreground"] != 7 || len(unsettled) != 1 || unsettled["uid:1"] != 2 {
		t.Fatalf("day %d spent %v unsettled %v; want 10, uid:1 8 and foreground 7, uid:1 2 unsettled", day, spent, unsettled)
	}
	// approve refuses: the attempt stays unconsented and may be asked again.
	live := at("b1", "uid:1", 10)
	l.Begin(live)
	r := msg.Reserve{Attempt: "b1", Controller: "dev", Application: live.Application, Operation: live.Operation, RequestSHA256: live.RequestSHA256}
	no := &msg.Refusal{Code: msg.CodePayerLimit, Reason: "over"}
	if err := l.Consent(r, "dev", func(Begin) *msg.Refusal { return no }); err != no {
		t.Fatalf("approve's refusal: %v", err)
	}
	if err := l.Consent(r, "dev", func(b Begin) *msg.Refusal {
		if b.Principal != "uid:1" {
			t.Errorf("approve saw principal %q", b.Principal)
		}
		return nil
	}); err != nil {
		t.Fatalf("after a refusal: %v", err)
	}
}

// TestOperatorResolutionAnswers: an attempt the host's operator released
// or charged answers its requestId from the resolve.v2 record from then
// on, after a replay too; a first-version resolve still reads, and the
// host's own release (not sent) frees the requestId.
func TestOperatorResolutionAnswers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	records := []struct {
		kind string
		body any
	}{
		{KindBegin, begin("rel", "r-rel", "x")},
		{KindResolveV2, ResolveV2{Attempt: "rel", State: msg.StateReleased, By: "cli", ResolvedBy: "uid:7", Reason: "never ran"}},
		{KindBegin, begin("perf", "r-perf", "x")},
		{KindResolveV2, ResolveV2{Attempt: "perf", State: msg.StatePerformed, By: "cli", ResolvedBy: "uid:7", Reason: "ran", Charge: 5}},
		{KindBegin, begin("ns", "r-ns", "x")},
		{KindResolveV2, ResolveV2{Attempt: "ns", State: msg.StateReleased, By: "cli"}},
		{KindBegin, begin("old", "r-old", "x")},
		{KindResolve, Resolve{Attempt: "old", State: msg.StateDefinite, By: "cli", Status: 200}},
	}
	seqs := map[string]uint64{}
	for _, r := range records {
		seq, err := j.Append(r.kind, r.body)
		if err != nil {
			t.Fatal(err)
		}
		if r.kind != KindBegin {
			seqs[r.body.(interface{ attempt() string }).attempt()] = seq
		}
	}
	l := New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, req string
		state   msg.State
	}{{"rel", "r-rel", msg.StateReleased}, {"perf", "r-perf", msg.StatePerformed}, {"old", "r-old", msg.StateDefinite}} {
		p, ok := l.Begin(begin("new-"+tc.id, tc.req, "x"))
		if ok || p.Attempt != tc.id || p.State != tc.state || p.Answer.Seq != seqs[tc.id] || !p.SameRequest {
			t.Errorf("%s: %+v %v; want decided by %s at %d", tc.id, p, ok, tc.state, seqs[tc.id])
		}
	}
	if _, ok := l.Begin(begin("new-ns", "r-ns", "x")); !ok {
		t.Error("a release the host recorded (not sent) still blocks its requestId")
	}
	if len(l.UncertainAttempts()) != 0 {
		t.Errorf("uncertain after the resolutions: %+v", l.UncertainAttempts())
	}
}

func (r ResolveV2) attempt() string { return r.Attempt }
func (r Resolve) attempt() string   { return r.Attempt }

// at is a place of record seq, for the tests that end attempts by hand.
func at(seq uint64) journal.Place { return journal.Place{Seq: seq, Segment: 1} }
