package controller

import (
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// TestConsentOnlyInFlight does what the attacker did: the host asks the
// payer's consent (a reserve) for an attempt awaiting approval while no
// collect of it is in flight, and for an attempt with no dispatch in
// flight. Each is refused in one line, nothing is journaled (no consented
// record), held or charged against the day, and the attempt is still
// consented to, once, when the host asks during the collect.
func TestConsentOnlyInFlight(t *testing.T) {
	rig := newConsentRig(t, &ctlconf.Payer{MaxPerCall: 10, PerDay: 100}, 5)
	c := rig.c
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: ledger.JournalOwner, Format: ledger.JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c.j = j
	unchanged := func(what, id string) {
		t.Helper()
		if _, left, _, _ := c.pay.budget("uid:1000"); left != 100 {
			t.Fatalf("%s: the day has %d credits left, want 100: something was charged", what, left)
		}
		if _, ok := c.pay.held(id); ok {
			t.Fatalf("%s: a consent to %s is held", what, id)
		}
	}

	// An attempt whose dispatch exchange is over: the host's answer came.
	r := rig.begin(t, "done", "uid:1000", 5)
	c.flight.start("done", msg.TypeCollect) // then another frame, and it too ends
	c.flight.by = nil
	seq := j.LastSeq()
	typ, body := c.reserve(r)
	wantRefused(t, typ, body, msg.CodeNoConsent, "this controller has no dispatch or collect of attempt done in flight: nothing was consented")
	unchanged("no exchange in flight", "done")

	// An attempt awaiting approval, no collect in flight; then with its
	// (finished) dispatch's entry still there.
	marked := rig.begin(t, "marked", "uid:1000", 5)
	aw := ledger.Awaiting{Attempt: "marked", Ask: "ask-0123456789ab", ExpiresAt: rig.now.UnixMilli() + 1}
	if _, err := j.Append(ledger.KindAwaiting, aw); err != nil {
		t.Fatal(err)
	}
	c.led.Awaited(aw)
	seq = j.LastSeq()
	const awaits = "attempt marked awaits approval (ask ask-0123456789ab) and this controller has no collect of it in flight: nothing was consented"
	typ, body = c.reserve(marked) // rig.begin left a dispatch entry: not a collect
	wantRefused(t, typ, body, msg.CodeNoConsent, awaits)
	delete(c.flight.by, "marked")
	typ, body = c.reserve(marked)
	wantRefused(t, typ, body, msg.CodeNoConsent, awaits)
	if j.LastSeq() != seq {
		t.Fatalf("a refused consent journaled %d records", j.LastSeq()-seq)
	}
	if !c.led.NeedsConsentRecord("marked") {
		t.Fatal("a refused consent recorded the attempt consented")
	}
	unchanged("awaiting, no collect", "marked")

	// The collect of its approved ask: consented once, and recorded.
	end := c.flight.start("marked", msg.TypeCollect)
	if typ, body := c.reserve(marked); typ != msg.TypeConsent {
		t.Fatalf("during the collect: %s %+v", typ, body)
	}
	end()
	if j.LastSeq() != seq+1 {
		t.Fatalf("the consent during the collect journaled %d records, want its consented record", j.LastSeq()-seq)
	}
	if _, left, _, _ := c.pay.budget("uid:1000"); left != 95 {
		t.Fatalf("after the one consent the day has %d left, want 95", left)
	}
	// The exchange over, the host asks again: refused by the guard first.
	typ, body = c.reserve(marked)
	wantRefused(t, typ, body, msg.CodeNoConsent, awaits)
}
