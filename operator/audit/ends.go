package audit

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The verify steps of the records that end an attempt after admission
// (ends.go): each receipt is checked against its reservation (when there
// is one), its recorded answer, its own terms (checkReceiptTerms) and the
// payer's consent, and kept for the chain, the balance checks and the
// charges (checkCharged).

// notSentV1 checks a version 1 not-sent record (no receipt).
func (a *journalAudit) NotSent(r journal.Record, b *hostlog.NotSent) error {
	return a.NotSentV2(r, b.Upgrade())
}

func (a *journalAudit) NotSentV2(r journal.Record, b *hostlog.NotSentV2) error {
	res := a.reserves[b.Attempt]
	if res == nil {
		return faultf("%s: releases attempt %s, which holds no reservation", recordWhere(r), b.Attempt)
	}
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	if b.Receipt != nil {
		where := recordWhere(r)
		rc, err := a.endReceipt(b.Receipt, res, b.Attempt, b.Seq, where)
		if err != nil {
			return err
		}
		if rc.Outcome != msg.StateNotSent || rc.Charge != 0 || rc.Status != 0 || rc.ResponseSHA256 != nil {
			return faultf("receipt %d (%s): a release before sending receipted as %s, status %d, charge %d", rc.Seq, where, rc.Outcome, rc.Status, rc.Charge)
		}
		a.checkReceiptAsk(rc, where)
		a.keepReceipt(r, b.Receipt, rc, b.Ledger)
	}
	a.event(res.rec.Controller, purseEvent{b.Ledger, int64(res.rec.Charge), eventRelease})
	a.end(b.Attempt, endReleased)
	return nil
}

// outcomeV1 checks a version 1 outcome: it charged the whole reservation
// and moved no balance.
func (a *journalAudit) Outcome(r journal.Record, b *hostlog.Outcome) error {
	var charge uint64
	if res := a.reserves[b.Attempt]; res != nil {
		charge = res.rec.Charge
	}
	return a.settle(r, b.Upgrade(charge), true)
}

func (a *journalAudit) OutcomeV2(r journal.Record, b *hostlog.OutcomeV2) error {
	return a.settle(r, b, false)
}

// settle checks the receipt of an outcome against its reservation, the
// recorded answer and the charge the record settled, and keeps it for the
// chain and the purse arithmetic; a version 2 record releases what it did
// not charge, at its own ledger number (v1: an upgraded version 1 record,
// whose ledger number is not its own).
func (a *journalAudit) settle(r journal.Record, b *hostlog.OutcomeV2, v1 bool) error {
	where := recordWhere(r)
	res := a.reserves[b.Attempt]
	if res == nil && a.ended[b.Attempt] == endOutcome {
		return a.secondOutcome(b.Receipt, b.Attempt, where)
	}
	if res == nil {
		return faultf("%s: attempt %s has no reservation", where, b.Attempt)
	}
	rc, err := a.endReceipt(b.Receipt, res, b.Attempt, b.Seq, where)
	if err != nil {
		return err
	}
	switch {
	case rc.Status != b.Status:
		return faultf("receipt %d (%s): status %d, the recorded answer is %d", rc.Seq, where, rc.Status, b.Status)
	case rc.Charge != b.Charge && v1:
		return faultf("receipt %d (%s): charges %d, the reservation was %d", rc.Seq, where, rc.Charge, res.rec.Charge)
	case rc.Charge != b.Charge:
		return faultf("receipt %d (%s): charges %d, the record settles %d", rc.Seq, where, rc.Charge, b.Charge)
	case b.Charge > res.rec.Charge:
		return faultf("receipt %d (%s): charges %d, the reservation was %d", rc.Seq, where, rc.Charge, res.rec.Charge)
	case rc.V == msg.ReceiptV2 && rc.Outcome != msg.StateDefinite:
		return faultf("receipt %d (%s): an answer receipted as %s", rc.Seq, where, rc.Outcome)
	case rc.V == msg.ReceiptV2 && msg.IsAnswer(rc.Status) && rc.Charge != res.rec.Charge:
		return faultf("receipt %d (%s): a %d answer charges %d, its reservation was %d", rc.Seq, where, rc.Status, rc.Charge, res.rec.Charge)
	case rc.V != msg.ReceiptV2 && rc.Charge == 0 && rc.Consent != nil:
		return faultf("receipt %d (%s): a free request carries a consent", rc.Seq, where)
	}
	if sum := sha256.Sum256(b.Body); !bytes.Equal(rc.ResponseSHA256, sum[:]) {
		return faultf("receipt %d (%s): the response hash does not match the recorded answer", rc.Seq, where)
	}
	if !v1 {
		if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
			return err
		}
		a.event(res.rec.Controller, purseEvent{b.Ledger, int64(res.rec.Charge - b.Charge), eventRelease})
	}
	a.checkReceiptAsk(rc, where)
	a.keepReceipt(r, b.Receipt, rc, b.Ledger)
	a.end(b.Attempt, endOutcome)
	return nil
}

// secondOutcome is the fault of an outcome of an attempt whose outcome
// was recorded already.
func (a *journalAudit) secondOutcome(signed []byte, attempt, where string) error {
	rc, err := msg.VerifyReceipt(signed, a.hostRing)
	if err != nil {
		return faultf("receipt in %s: %v", where, err)
	}
	return faultf("receipt %d (%s): attempt %s already has an outcome", rc.Seq, where, attempt)
}

// refused checks the receipt of an admitted attempt refused before
// anything was reserved: no reservation before or after it, nothing
// charged, and a consent it carries (the last-moment check refused after
// the payer consented) one for this attempt.
func (a *journalAudit) Refused(r journal.Record, b *hostlog.Refused) error {
	where := recordWhere(r)
	if a.reused(b.Attempt) {
		return faultf("%s: refuses attempt %s, which was already recorded", where, b.Attempt)
	}
	rc, err := msg.VerifyReceipt(b.Receipt, a.hostRing)
	if err != nil {
		return faultf("receipt in %s: %v", where, err)
	}
	switch {
	case rc.Attempt != b.Attempt || rc.Seq != b.Seq || rc.Controller != b.Controller:
		return faultf("receipt %d (%s): names attempt %s of %s, receipt %d; the record says %s of %s, %d", rc.Seq, where, rc.Attempt, rc.Controller, rc.Seq, b.Attempt, b.Controller, b.Seq)
	case rc.Outcome != msg.StateRefused || rc.Charge != 0 || rc.Status != 0 || rc.ResponseSHA256 != nil:
		return faultf("receipt %d (%s): a refusal receipted as %s, status %d, charge %d", rc.Seq, where, rc.Outcome, rc.Status, rc.Charge)
	case rc.Reason != b.Reason:
		return faultf("receipt %d (%s): its reason is not the record's", rc.Seq, where)
	}
	if err := checkReceiptTerms(rc); err != nil {
		return faultf("receipt %d (%s): %v", rc.Seq, where, err)
	}
	if rc.Consent != nil {
		if dk := a.dispatch[rc.Controller]; dk == nil {
			return faultf("receipt %d (%s): refuses an attempt of unknown controller %s", rc.Seq, where, rc.Controller)
		} else if _, err := checkConsent(rc.Consent, dk, consentClaim{Attempt: rc.Attempt, Controller: rc.Controller,
			Application: rc.Application, Operation: rc.Operation, RequestSHA256: rc.RequestSHA256}); err != nil {
			a.findings = append(a.findings, fmt.Sprintf("refusal of attempt %s (%s): %v", b.Attempt, where, err))
		}
	}
	a.checkReceiptAsk(rc, where)
	a.keepReceipt(r, b.Receipt, rc, b.Ledger)
	a.end(b.Attempt, endRefused)
	return nil
}

// endReceipt verifies the receipt of a record that ends reservation res
// and checks that it names that record and says what the reservation
// says (a redelivery's receipt names the redeliver record's resolver, a
// first delivery's none), and that its terms hold under the reservation's
// consent.
func (a *journalAudit) endReceipt(signed []byte, res *auditReserve, attempt string, seq uint64, where string) (msg.Receipt, error) {
	rc, err := msg.VerifyReceipt(signed, a.hostRing)
	if err != nil {
		return rc, faultf("receipt in %s: %v", where, err)
	}
	switch {
	case rc.Attempt != attempt || rc.Seq != seq:
		return rc, faultf("receipt %d (%s): names attempt %s, receipt %d; the record says %s, %d", rc.Seq, where, rc.Attempt, rc.Seq, attempt, seq)
	case rc.Controller != res.rec.Controller || rc.Application != res.rec.Application ||
		rc.Operation != res.rec.Operation || rc.Kind != res.rec.Kind || !bytes.Equal(rc.RequestSHA256, res.rec.RequestSHA256):
		return rc, faultf("receipt %d (%s): does not match the reservation of attempt %s", rc.Seq, where, attempt)
	case !bytes.Equal(rc.Consent, res.rec.Consent):
		return rc, faultf("receipt %d (%s): its payer consent is not the reserved one", rc.Seq, where)
	case rc.ResolvedBy != "" && res.redeliveredBy == "":
		return rc, faultf("receipt %d (%s): resolved by %q, but attempt %s was never redelivered", rc.Seq, where, rc.ResolvedBy, attempt)
	case rc.ResolvedBy != res.redeliveredBy:
		return rc, faultf("receipt %d (%s): resolved by %q; the last redeliver record of attempt %s says %q", rc.Seq, where, rc.ResolvedBy, attempt, res.redeliveredBy)
	}
	if err := checkReceiptTerms(rc); err != nil {
		return rc, faultf("receipt %d (%s): %v", rc.Seq, where, err)
	}
	// The consent's own signature and claim are the reservation's finding
	// (checkReserveConsent); here, whether it allows the price charged.
	if dk := a.dispatch[rc.Controller]; rc.Consent != nil && dk != nil {
		if c, err := msg.OpenConsent(rc.Consent, dk); err == nil {
			if err := checkConsentTerms(rc, c); err != nil {
				a.findings = append(a.findings, fmt.Sprintf("receipt %d (%s): %v", rc.Seq, where, err))
			}
		}
	}
	return rc, nil
}
