package ledger

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

func openJournal(t *testing.T, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func appendAll(t *testing.T, j *journal.Journal, recs ...any) {
	t.Helper()
	for _, r := range recs {
		var kind string
		switch r.(type) {
		case Begin:
			kind = KindBegin
		case Awaiting:
			kind = KindAwaiting
		case Consented:
			kind = KindConsented
		case Result:
			kind = KindResult
		default:
			t.Fatalf("no kind for %T", r)
		}
		if _, err := j.Append(kind, r); err != nil {
			t.Fatal(err)
		}
	}
}

func paid(id, reqID, body string) Begin {
	b := begin(id, reqID, body)
	b.Principal, b.Agent, b.Day = "uid:1", "uid:1", 10
	return b
}

func reserveOf(b Begin) msg.Reserve {
	return msg.Reserve{Attempt: b.Attempt, Controller: "dev", Application: b.Application, Operation: b.Operation, RequestSHA256: b.RequestSHA256, Charge: 4}
}

func refusalCode(t *testing.T, err error) string {
	t.Helper()
	var r *msg.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("refusal %v is not a *msg.Refusal", err)
	}
	return r.Code
}

// TestAwaitingAtStart: found at start, begin + awaiting with no consented
// record and no result is awaiting approval: not uncertain (Uncertain
// leaves it out, so no enrollment is blocked), not counted for the payer's
// day, consented to once, and its requestId decides a call again (the
// same arguments: collect its ask; others: a conflict). Begin + awaiting +
// consented with no result is uncertain, counted at the amount consented;
// a begin alone is uncertain and counted at the ceiling (unsettled).
func TestAwaitingAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, dir)
	aw, cons, plain, done := paid("aw", "r-aw", "x"), paid("cons", "r-cons", "x"), paid("plain", "r-plain", "x"), paid("done", "r-done", "x")
	appendAll(t, j,
		aw, Awaiting{Attempt: "aw", Ask: "ask-aaaaaaaaaaaa", ExpiresAt: 1},
		cons, Awaiting{Attempt: "cons", Ask: "ask-bbbbbbbbbbbb", ExpiresAt: 1}, Consented{Attempt: "cons", ConsentSHA256: make([]byte, 32), Amount: 7},
		plain,
		done, Awaiting{Attempt: "done", Ask: "ask-cccccccccccc", ExpiresAt: 1}, Consented{Attempt: "done", ConsentSHA256: make([]byte, 32), Amount: 9},
		Result{Attempt: "done", Outcome: msg.StateDefinite, Status: 200, Receipt: []byte{1}, Charge: 3, Consented: 9, Ask: "ask-cccccccccccc", AnsweredBy: "uid:1001"},
	)
	u, err := Uncertain(j)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) != 2 || u[0].ID != "cons" || u[1].ID != "plain" {
		t.Fatalf("uncertain %+v; want cons and plain, not the attempt awaiting approval", u)
	}
	if u[0].Detail != "consented after its approval, no result: pending inspection" {
		t.Errorf("cons detail %q", u[0].Detail)
	}
	l := New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if a, _, ok := l.Open("aw"); !ok || a.State != msg.StateAwaitingApproval || a.Detail != "awaiting approval (ask ask-aaaaaaaaaaaa)" {
		t.Fatalf("aw at start: %+v %v", a, ok)
	}
	day, spent, unsettled := l.Spending()
	if day != 10 || spent["uid:1"] != 3+7 || unsettled["uid:1"] != 1 {
		t.Fatalf("spending: day %d spent %v unsettled %v; want uid:1 spent 10 (done's charge, cons's consent), 1 unsettled (plain)", day, spent, unsettled)
	}

	p, ok := l.Begin(paid("again", "r-aw", "x"))
	if ok || p.Attempt != "aw" || p.State != msg.StateAwaitingApproval || !p.SameRequest || p.Ask != "ask-aaaaaaaaaaaa" {
		t.Fatalf("a call again on aw: %+v %v", p, ok)
	}
	if p, ok := l.Begin(paid("other", "r-aw", "y")); ok || p.SameRequest || p.State != msg.StateAwaitingApproval {
		t.Fatalf("other arguments on aw: %+v %v", p, ok)
	}
	if _, _, ok := l.Decided("uid:1", "appliance", "r-aw"); !ok {
		t.Error("Decided: an attempt awaiting approval decides its requestId")
	}

	if !l.NeedsConsentRecord("aw") || l.NeedsConsentRecord("cons") || l.NeedsConsentRecord("plain") {
		t.Error("NeedsConsentRecord: only aw (awaiting, never consented) needs its consent recorded")
	}
	if err := l.Consent(reserveOf(cons), "dev", nil); refusalCode(t, err) != msg.CodeNoConsent ||
		err.Error() != "no-consent: attempt cons predates this controller process and is pending inspection" {
		t.Fatalf("consent to cons (consented before the restart): %v", err)
	}
	if err := l.Consent(reserveOf(plain), "dev", nil); refusalCode(t, err) != msg.CodeNoConsent {
		t.Fatalf("consent to plain: %v", err)
	}
	wrong := reserveOf(aw)
	wrong.Operation = "other"
	if err := l.Consent(wrong, "dev", nil); refusalCode(t, err) != msg.CodeNoConsent {
		t.Fatalf("consent to aw for another operation: %v", err)
	}
	if err := l.Consent(reserveOf(aw), "dev", nil); err != nil {
		t.Fatalf("consent to aw, found at start awaiting approval: %v", err)
	}
	if err := l.Consent(reserveOf(aw), "dev", nil); refusalCode(t, err) != msg.CodeDuplicate ||
		err.Error() != "duplicate: attempt aw was already consented to" {
		t.Fatalf("second consent to aw: %v", err)
	}
}

// TestAwaitingReopened: the consented record journaled, the journal closed
// and reopened, the attempt is uncertain and counted at what was
// consented; it is never consented to again.
func TestAwaitingReopened(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, dir)
	aw := paid("aw", "r-aw", "x")
	appendAll(t, j, aw, Awaiting{Attempt: "aw", Ask: "ask-aaaaaaaaaaaa", ExpiresAt: 1})
	j.Close()

	j = openJournal(t, dir)
	l := New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	if err := l.Consent(reserveOf(aw), "dev", nil); err != nil {
		t.Fatalf("consent after the first reopen: %v", err)
	}
	c := Consented{Attempt: "aw", ConsentSHA256: make([]byte, 32), Amount: 4}
	appendAll(t, j, c)
	l.ConsentRecorded(c)
	if l.NeedsConsentRecord("aw") {
		t.Error("NeedsConsentRecord after the consented record")
	}
	j.Close()

	j = openJournal(t, dir)
	defer j.Close()
	l = New()
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	if u := l.UncertainAttempts(); len(u) != 1 || u[0].ID != "aw" {
		t.Fatalf("uncertain after the second reopen: %+v", u)
	}
	if _, spent, unsettled := l.Spending(); spent["uid:1"] != 4 || unsettled["uid:1"] != 0 {
		t.Fatalf("spending: spent %v unsettled %v; want uid:1 at the 4 consented", spent, unsettled)
	}
	if err := l.Consent(reserveOf(aw), "dev", nil); refusalCode(t, err) != msg.CodeNoConsent {
		t.Fatalf("consent after the consented record: %v", err)
	}
	if p, ok := l.Begin(paid("again", "r-aw", "x")); ok || p.State != msg.StateUncertain {
		t.Fatalf("a call again: %+v %v; want refused by the uncertain attempt", p, ok)
	}
}

// TestAwaitingLive: an attempt this process began awaits approval once its
// awaiting record is journaled (Awaited): its requestId decides a call
// again, it is consented to once and needs its consent recorded; an
// attempt never marked needs no record; Finish ends it.
func TestAwaitingLive(t *testing.T) {
	l := New()
	a1 := paid("a1", "r1", "x")
	l.Begin(a1)
	if l.NeedsConsentRecord("a1") {
		t.Error("a pending attempt with no awaiting record needs its consent recorded")
	}
	l.Awaited(Awaiting{Attempt: "a1", Ask: "ask-aaaaaaaaaaaa", ExpiresAt: 1})
	if a, _, _ := l.Open("a1"); a.State != msg.StateAwaitingApproval {
		t.Fatalf("after Awaited: %+v", a)
	}
	if len(l.UncertainAttempts()) != 0 {
		t.Fatalf("uncertain: %+v", l.UncertainAttempts())
	}
	if p, ok := l.Begin(paid("a2", "r1", "x")); ok || p.Attempt != "a1" || p.State != msg.StateAwaitingApproval || p.Ask != "ask-aaaaaaaaaaaa" {
		t.Fatalf("a call again: %+v %v", p, ok)
	}
	if !l.NeedsConsentRecord("a1") {
		t.Error("an awaiting attempt needs its consent recorded")
	}
	if l.AskOf("a1") != "ask-aaaaaaaaaaaa" || l.AskOf("nope") != "" {
		t.Errorf("AskOf: %q", l.AskOf("a1"))
	}
	if err := l.Consent(reserveOf(a1), "dev", nil); err != nil {
		t.Fatal(err)
	}
	l.Finish(Result{Attempt: "a1", Outcome: msg.StateDefinite, Status: 200}, at(5))
	if _, _, open := l.Open("a1"); open {
		t.Fatal("a1 still open after its result")
	}
	plain := paid("b1", "r2", "x")
	l.Begin(plain)
	if err := l.Consent(reserveOf(plain), "dev", nil); err != nil || l.NeedsConsentRecord("b1") {
		t.Fatalf("an attempt never marked: consent %v, needs a record %v", err, l.NeedsConsentRecord("b1"))
	}
}
