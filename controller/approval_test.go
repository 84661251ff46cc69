package controller

import (
	"crypto/sha256"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestApprovalsHoldAndPush: one call holds an attempt at a time; a push
// wakes the call holding it, once; a push for an attempt nobody holds is
// remembered and wakes the next hold at once; past maxRememberedPushes the
// oldest is forgotten.
func TestApprovalsHoldAndPush(t *testing.T) {
	a := newApprovals()
	wake, ok := a.hold("a1")
	if !ok || woken(wake) {
		t.Fatal("first hold")
	}
	if _, ok := a.hold("a1"); ok {
		t.Fatal("a second hold of a held attempt")
	}
	a.push(msg.VerdictPush{Attempt: "a1", Ask: "k", State: msg.AskApproved})
	a.push(msg.VerdictPush{Attempt: "a1", Ask: "k", State: msg.AskApproved}) // never blocks
	if !woken(wake) || woken(wake) {
		t.Fatal("a push wakes its holder once")
	}
	a.release("a1")

	for i := range maxRememberedPushes + 1 {
		a.push(msg.VerdictPush{Attempt: "p" + strconv.Itoa(i), Ask: "k", State: msg.AskDenied})
	}
	if len(a.pushed) != maxRememberedPushes {
		t.Fatalf("%d pushes remembered, want %d", len(a.pushed), maxRememberedPushes)
	}
	first, _ := a.hold("p0")
	last, _ := a.hold("p" + strconv.Itoa(maxRememberedPushes))
	if woken(first) || !woken(last) {
		t.Fatal("the oldest push is forgotten past the bound, the newest wakes its next hold")
	}
	a.stop()
	a.stop() // twice is once
	<-a.stopping
}

// TestConsentRecordedOnlyWhenAwaited: a consent to an attempt with an
// awaiting record is journaled (consented: the SHA-256 of the signed
// consent and the most it allows) before the reply; a consent to any other
// attempt journals nothing; reopened, the consented attempt is uncertain.
func TestConsentRecordedOnlyWhenAwaited(t *testing.T) {
	rig := newConsentRig(t, &ctlconf.Payer{MaxPerCall: 10, PerDay: 100}, 5)
	dir := filepath.Join(t.TempDir(), "journal")
	opts := journal.Options{Owner: ledger.JournalOwner, Format: ledger.JournalFormat, Config: []byte(`{}`), SegmentSize: 1 << 20}
	j, err := journal.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	rig.c.j = j
	journalBegin := func(r msg.Reserve) {
		t.Helper()
		_, b, _ := rig.c.led.Open(r.Attempt)
		if _, err := j.Append(ledger.KindBegin, b); err != nil {
			t.Fatal(err)
		}
	}
	plain := rig.begin(t, "plain", "uid:1000", 5)
	journalBegin(plain)
	seq := j.LastSeq()
	if typ, body := rig.c.reserve(plain); typ != msg.TypeConsent {
		t.Fatalf("plain: %s %+v", typ, body)
	}
	if j.LastSeq() != seq {
		t.Fatalf("a consent to an attempt never marked journaled %d records", j.LastSeq()-seq)
	}

	marked := rig.begin(t, "marked", "uid:1000", 5)
	journalBegin(marked)
	aw := ledger.Awaiting{Attempt: "marked", Ask: "ask-0123456789ab", ExpiresAt: rig.now.UnixMilli() + 1}
	if _, err := j.Append(ledger.KindAwaiting, aw); err != nil {
		t.Fatal(err)
	}
	rig.c.led.Awaited(aw)
	rig.c.flight.start("marked", msg.TypeCollect) // the collect of its approved ask
	typ, body := rig.c.reserve(marked)
	if typ != msg.TypeConsent {
		t.Fatalf("marked: %s %+v", typ, body)
	}
	rec, err := lastRecord(j)
	if err != nil || rec.Kind != ledger.KindConsented {
		t.Fatalf("last record %+v, %v; want consented", rec, err)
	}
	var c ledger.Consented
	if err := ledger.Decode(rec, &c); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(body.(msg.ConsentReply).Consent)
	if c.Attempt != "marked" || c.Amount != 5 || string(c.ConsentSHA256) != string(h[:]) {
		t.Fatalf("consented %+v", c)
	}
	j.Close()

	ro, err := journal.Open(dir, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	u, err := ledger.Uncertain(ro)
	if err != nil || len(u) != 2 {
		t.Fatalf("uncertain after reopening: %+v, %v; want plain and marked", u, err)
	}
}

// lastRecord is j's last record.
func lastRecord(j *journal.Journal) (journal.Record, error) {
	var out journal.Record
	err := j.Iterate(j.LastSeq(), func(r journal.Record) error { out = r; return nil })
	return out, err
}
