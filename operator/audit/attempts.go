package audit

import (
	"bytes"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// reserveV2 verifies a reservation that kept its request: the request
// must be the one it hashes, then it is audited as any reservation.
func (a *journalAudit) ReserveV2(r journal.Record, b *hostlog.ReserveV2) error {
	if err := b.CheckRequest(); err != nil {
		return faultf("%s: attempt %s: %v", recordWhere(r), b.Attempt, err)
	}
	a.checkApproval(r, b)
	return a.Reserve(r, b.V1())
}

// redeliver checks that a redelivery names an open reservation, and keeps
// its resolver for the receipt that ends it (endReceipt).
func (a *journalAudit) Redeliver(r journal.Record, b *hostlog.Redeliver) error {
	res := a.reserves[b.Attempt]
	if res == nil {
		return faultf("%s: redelivers attempt %s, which holds no open reservation", recordWhere(r), b.Attempt)
	}
	res.redeliveredBy = b.By
	return nil
}

// resolve checks an operator's resolution and its receipt against the
// reservation: a release charges 0 and gives the charge back (a balance
// change at its ledger number), a settlement charges the reservation; both
// carry the reserved consent, the resolver and the reason, and name no
// response.
func (a *journalAudit) Resolve(r journal.Record, b *hostlog.Resolve) error {
	where := recordWhere(r)
	rc, err := msg.VerifyReceipt(b.Receipt, a.hostRing)
	if err != nil {
		return faultf("receipt in %s: %v", where, err)
	}
	res := a.reserves[b.Attempt]
	if res == nil {
		return faultf("receipt %d (%s): resolves attempt %s, which holds no open reservation", rc.Seq, where, b.Attempt)
	}
	want := res.rec.Charge
	if b.State == msg.StateReleased {
		want = 0
	}
	switch {
	case rc.V != msg.ReceiptV2 || rc.Outcome != b.State || (b.State != msg.StateReleased && b.State != msg.StatePerformed):
		return faultf("receipt %d (%s): outcome %q (version %d) for a resolution to %q", rc.Seq, where, rc.Outcome, rc.V, b.State)
	case rc.Attempt != b.Attempt || rc.Seq != b.Seq:
		return faultf("receipt %d (%s): names attempt %s, receipt %d; the record says %s, %d", rc.Seq, where, rc.Attempt, rc.Seq, b.Attempt, b.Seq)
	case rc.Controller != res.rec.Controller || rc.Application != res.rec.Application ||
		rc.Operation != res.rec.Operation || rc.Kind != res.rec.Kind || !bytes.Equal(rc.RequestSHA256, res.rec.RequestSHA256):
		return faultf("receipt %d (%s): does not match the reservation of attempt %s", rc.Seq, where, b.Attempt)
	case rc.Charge != want:
		return faultf("receipt %d (%s): a resolution to %s charges %d, want %d", rc.Seq, where, b.State, rc.Charge, want)
	case rc.ResolvedBy != b.By || b.By == "" || b.Reason == "":
		return faultf("receipt %d (%s): resolved by %q; the record says %q, with reason %q", rc.Seq, where, rc.ResolvedBy, b.By, b.Reason)
	case rc.Status != 0 || rc.ResponseSHA256 != nil:
		return faultf("receipt %d (%s): a resolution names a response", rc.Seq, where)
	case !bytes.Equal(rc.Consent, res.rec.Consent):
		return faultf("receipt %d (%s): its payer consent is not the reserved one", rc.Seq, where)
	}
	if b.State == msg.StateReleased {
		if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
			return err
		}
		a.event(res.rec.Controller, purseEvent{b.Ledger, int64(res.rec.Charge), eventRelease})
		a.keepReceipt(r, b.Receipt, rc, b.Ledger)
		a.end(b.Attempt, endReleased)
		return nil
	}
	a.keepReceipt(r, b.Receipt, rc, b.Ledger)
	a.end(b.Attempt, endOutcome)
	return nil
}
