package ledger

import (
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// TestDenialDecides: the denied attempt of the journal of every kind
// decides a call again with its requestId, with the same and with other
// arguments, from memory, from the history index and from a snapshot
// (the answer its result record), and registers nothing; a refusal that
// is not a receipted denial decides nothing.
func TestDenialDecides(t *testing.T) {
	recs := records(t, allKindsJournal(t))
	mem := New()
	replayAll(t, mem, recs)
	indexed := NewIndexed(newIndex(t))
	replayAll(t, indexed, recs)
	snap, err := mem.Encode()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := DecodeState(StateVersion, snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*Ledger{"memory": mem, "index": indexed, "snapshot": restored} {
		for _, body := range []string{"x", "other arguments"} {
			p, ok := l.Begin(paidOn("k-new", "r-dn", body, 100))
			if ok || p.Err != nil || !p.Denied || p.Attempt != "k-dn" || p.State != msg.StateRefused || p.Answer.Seq == 0 ||
				p.SameRequest != (body == "x") {
				t.Fatalf("%s, %s: %+v %v, want the denial of k-dn", name, body, p, ok)
			}
		}
		if _, _, ok := l.Decided("agent1", "appliance", "r-dn"); !ok {
			t.Fatalf("%s: Decided leaves a denied requestId undecided", name)
		}
	}
}

// TestRefusalWithoutReceiptIsNoDenial: a refusal coded denied with no
// receipt naming an ask (not the host's receipted denial) frees its
// requestId as every other refusal does.
func TestRefusalWithoutReceiptIsNoDenial(t *testing.T) {
	l := New()
	for _, res := range []Result{
		{Attempt: "a1", Outcome: msg.StateRefused, Refusal: &msg.Refusal{Code: msg.CodeDenied, Reason: "no"}},
		{Attempt: "a2", Outcome: msg.StateRefused, Refusal: &msg.Refusal{Code: msg.CodeDenied, Reason: "no"}, Receipt: []byte{1}},
		{Attempt: "a3", Outcome: msg.StateRefused, Refusal: &msg.Refusal{Code: msg.CodeUnavailable, Reason: "no"}, Receipt: []byte{1}, Ask: "ask-aaaaaaaaaaaa"},
	} {
		if _, ok := l.Begin(paidOn(res.Attempt, "r1", "x", 1)); !ok {
			t.Fatalf("%s: refused to begin", res.Attempt)
		}
		l.Finish(res, journalPlace(7))
	}
	if p, ok := l.Begin(paidOn("a4", "r1", "x", 1)); !ok || p.Denied {
		t.Fatalf("decided by a refusal that is no denial: %+v", p)
	}
}

func journalPlace(seq uint64) journal.Place { return journal.Place{Seq: seq} }
