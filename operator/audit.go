package operator

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sort"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// journalAudit is `receipts verify`'s pass over the host journal: the
// evidence it gathers, record by record, for the receipt chain and the
// purse arithmetic. Its methods are the verify steps of hostRecords; each
// returns the first fault it finds. It is built and used by one call of
// Store.auditReceipts, so it has no lock.
type journalAudit struct {
	hostRing    *wire.Keyring            // the host's receipt key (the operator key's Ed25519 half)
	dispatch    map[string]*wire.Keyring // controller -> its pinned dispatch key, which signs consents
	dispatchKID map[string]string        // controller -> that key's kid, for the report
	ctrlOrder   []string                 // controllers in the order they were added
	reserves    map[string]*auditReserve // attempt -> its reservation
	events      map[string][]purseEvent  // controller -> every change to its balance
	checks      map[string][]balanceCheck
	ledgers     map[uint64]uint64 // ledger number -> journal seq
	receipts    []chainReceipt    // in journal order
	checkpoints []chainCheckpoint // in journal order
	findings    []string          // consents that do not hold, in journal order
}

// auditReserve is one reservation and what became of it.
type auditReserve struct {
	rec      recReserve
	seq      uint64 // its journal record
	released bool   // a not-sent record gave the charge back
	outcome  bool   // an outcome record receipted it
	detail   string // the last uncertain record's detail
}

// purseEvent is one change to a purse's balance, at its ledger number.
type purseEvent struct {
	ledger uint64
	delta  int64
}

// balanceCheck is a receipt's BalanceAfter, to be checked against the
// purse's history up to its outcome's ledger number.
type balanceCheck struct {
	ledger  uint64
	balance uint64
	seq     uint64
	where   string
}

func newJournalAudit(hostRing *wire.Keyring) *journalAudit {
	return &journalAudit{
		hostRing:    hostRing,
		dispatch:    map[string]*wire.Keyring{},
		dispatchKID: map[string]string{},
		reserves:    map[string]*auditReserve{},
		events:      map[string][]purseEvent{},
		checks:      map[string][]balanceCheck{},
		ledgers:     map[uint64]uint64{},
	}
}

// recordWhere names a journal record in a fault.
func recordWhere(r journal.Record) string { return fmt.Sprintf("journal record %d", r.Seq) }

// record verifies one journal record.
func (a *journalAudit) record(r journal.Record) error {
	if journalOwnKind(r.Kind) {
		return nil
	}
	k, body, err := decodeRecord(r)
	if err != nil {
		return faultf("%s: %v", recordWhere(r), err)
	}
	if k.verify == nil {
		return nil
	}
	return k.verify(a, r, body)
}

// claimLedger records that journal record seq carries ledger number n,
// which no other record may carry.
func (a *journalAudit) claimLedger(n, seq uint64) error {
	if n == 0 {
		return faultf("journal record %d carries no ledger number", seq)
	}
	if other, dup := a.ledgers[n]; dup {
		return faultf("journal records %d and %d carry the same ledger number %d", other, seq, n)
	}
	a.ledgers[n] = seq
	return nil
}

func (a *journalAudit) controllerAdd(r journal.Record, b *recControllerAdd) error {
	where := recordWhere(r)
	var ck msg.ControllerKeys
	if err := wire.Unmarshal(b.Keys, &ck); err != nil {
		return faultf("%s: %v", where, err)
	}
	k, err := wire.ParsePublicKey(ck.Dispatch)
	if err != nil {
		return faultf("%s: %v", where, err)
	}
	a.dispatch[b.Name] = wire.NewKeyring(k)
	a.dispatchKID[b.Name] = k.KID().String()
	a.ctrlOrder = append(a.ctrlOrder, b.Name)
	return nil
}

func (a *journalAudit) purseFund(r journal.Record, b *recPurseFund) error {
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	a.events[b.Controller] = append(a.events[b.Controller], purseEvent{b.Ledger, int64(b.Amount)})
	return nil
}

func (a *journalAudit) reserve(r journal.Record, b *recReserve) error {
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	if a.reserves[b.Attempt] != nil {
		return faultf("%s: attempt %s reserved twice", recordWhere(r), b.Attempt)
	}
	dk := a.dispatch[b.Controller]
	if dk == nil {
		return faultf("%s: attempt %s reserves from unknown controller %s", recordWhere(r), b.Attempt, b.Controller)
	}
	a.reserves[b.Attempt] = &auditReserve{rec: *b, seq: r.Seq}
	a.events[b.Controller] = append(a.events[b.Controller], purseEvent{b.Ledger, -int64(b.Charge)})
	if err := checkReserveConsent(b, dk); err != nil {
		a.findings = append(a.findings, fmt.Sprintf("reservation of attempt %s (%s): %v", b.Attempt, recordWhere(r), err))
	}
	return nil
}

// checkReserveConsent checks a reservation's payer consent under the
// controller's pinned dispatch key, with or without an outcome: a charge
// above 0 needs one, and one given must be for this attempt and request
// and allow at least the charge. A reservation is one an attempt (reserve
// refuses a second), so a consent cannot pay for two of them.
func checkReserveConsent(b *recReserve, dispatch *wire.Keyring) error {
	if b.Consent == nil {
		if b.Charge > 0 {
			return fmt.Errorf("holds %d with no payer consent", b.Charge)
		}
		return nil
	}
	_, err := checkConsent(b.Consent, dispatch, consentClaim{Attempt: b.Attempt, Controller: b.Controller,
		Application: b.Application, Operation: b.Operation, RequestSHA256: b.RequestSHA256, Charge: b.Charge})
	return err
}

// uncertain keeps the detail of an attempt's uncertain record for the
// finding that reports it still held.
func (a *journalAudit) uncertain(r journal.Record, b *recUncertain) error {
	res := a.reserves[b.Attempt]
	if res == nil || res.released || res.outcome {
		return faultf("%s: marks attempt %s uncertain, which holds no open reservation", recordWhere(r), b.Attempt)
	}
	res.detail = b.Detail
	return nil
}

// heldFindings reports every reservation with neither an outcome nor a
// release: its charge stays taken from the purse with no receipt for it.
func (a *journalAudit) heldFindings() []string {
	var held []*auditReserve
	for _, res := range a.reserves {
		if !res.released && !res.outcome {
			held = append(held, res)
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i].seq < held[j].seq })
	out := make([]string, 0, len(held))
	for _, res := range held {
		detail := res.detail
		if detail == "" {
			detail = "no outcome recorded"
		}
		held := fmt.Sprintf("%d charged without a receipt, still held", res.rec.Charge)
		if res.rec.Charge == 0 {
			held = "free, with no outcome: still open"
		}
		out = append(out, fmt.Sprintf("reservation of attempt %s (journal record %d): %s (%s)", res.rec.Attempt, res.seq, held, trunc(detail, 120)))
	}
	return out
}

// consentReports says, per controller, how many receipts it has; in a
// store every consent is checked against its pinned dispatch key.
func (a *journalAudit) consentReports() []ConsentReport {
	n := map[string]int{}
	for _, c := range a.receipts {
		n[c.r.Controller]++
	}
	out := make([]ConsentReport, 0, len(a.ctrlOrder))
	for _, name := range a.ctrlOrder {
		out = append(out, ConsentReport{Controller: name, Receipts: n[name], Checked: true, DispatchID: a.dispatchKID[name]})
	}
	return out
}

func (a *journalAudit) notSent(r journal.Record, b *recNotSent) error {
	res := a.reserves[b.Attempt]
	if res == nil || res.released || res.outcome {
		return faultf("%s: releases attempt %s, which holds no reservation", recordWhere(r), b.Attempt)
	}
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	res.released = true
	a.events[res.rec.Controller] = append(a.events[res.rec.Controller], purseEvent{b.Ledger, int64(res.rec.Charge)})
	return nil
}

// outcome checks the receipt of an outcome against its reservation, the
// recorded answer and the payer's consent, and keeps it for the chain and
// the purse arithmetic.
func (a *journalAudit) outcome(r journal.Record, b *recOutcome) error {
	where := recordWhere(r)
	rc, err := msg.VerifyReceipt(b.Receipt, a.hostRing)
	if err != nil {
		return faultf("receipt in %s: %v", where, err)
	}
	if err := a.matchReservation(rc, b, where); err != nil {
		return err
	}
	if sum := sha256.Sum256(b.Body); !bytes.Equal(rc.ResponseSHA256, sum[:]) {
		return faultf("receipt %d (%s): the response hash does not match the recorded answer", rc.Seq, where)
	}
	if rc.Charge == 0 && rc.Consent != nil {
		return faultf("receipt %d (%s): a free request carries a consent", rc.Seq, where)
	}
	a.reserves[b.Attempt].outcome = true
	a.receipts = append(a.receipts, chainReceipt{signed: b.Receipt, r: rc, where: where, order: int(r.Seq)})
	a.checks[rc.Controller] = append(a.checks[rc.Controller], balanceCheck{b.Ledger, rc.BalanceAfter, rc.Seq, where})
	return nil
}

// matchReservation checks that a receipt names its outcome record and
// says what the attempt's reservation and recorded answer say.
func (a *journalAudit) matchReservation(rc msg.Receipt, b *recOutcome, where string) error {
	res := a.reserves[b.Attempt]
	switch {
	case res == nil || res.released:
		return faultf("receipt %d (%s): attempt %s has no reservation", rc.Seq, where, b.Attempt)
	case res.outcome:
		return faultf("receipt %d (%s): attempt %s already has an outcome", rc.Seq, where, b.Attempt)
	case rc.Attempt != b.Attempt || rc.Seq != b.Seq:
		return faultf("receipt %d (%s): names attempt %s, receipt %d; the record says %s, %d", rc.Seq, where, rc.Attempt, rc.Seq, b.Attempt, b.Seq)
	case rc.Controller != res.rec.Controller || rc.Application != res.rec.Application ||
		rc.Operation != res.rec.Operation || rc.Kind != res.rec.Kind || !bytes.Equal(rc.RequestSHA256, res.rec.RequestSHA256):
		return faultf("receipt %d (%s): does not match the reservation of attempt %s", rc.Seq, where, b.Attempt)
	case rc.Charge != res.rec.Charge:
		return faultf("receipt %d (%s): charges %d, the reservation was %d", rc.Seq, where, rc.Charge, res.rec.Charge)
	case rc.Status != b.Status:
		return faultf("receipt %d (%s): status %d, the recorded answer is %d", rc.Seq, where, rc.Status, b.Status)
	case !bytes.Equal(rc.Consent, res.rec.Consent):
		return faultf("receipt %d (%s): its payer consent is not the reserved one", rc.Seq, where)
	}
	return nil
}

func (a *journalAudit) checkpoint(r journal.Record, b *recCheckpoint) error {
	a.checkpoints = append(a.checkpoints, chainCheckpoint{signed: b.Checkpoint, where: recordWhere(r), order: int(r.Seq)})
	return nil
}

// purses does the purse arithmetic, in ledger order, per controller: each
// receipt's BalanceAfter must be the balance over exactly the changes
// numbered at or below its outcome's ledger number (see doc.go, the
// ledger). With a fault it returns the purses reported before it.
func (a *journalAudit) purses() ([]PurseReport, error) {
	var out []PurseReport
	for _, name := range a.ctrlOrder {
		evs, cks := a.events[name], a.checks[name]
		sort.Slice(evs, func(i, j int) bool { return evs[i].ledger < evs[j].ledger })
		sort.Slice(cks, func(i, j int) bool { return cks[i].ledger < cks[j].ledger })
		var bal int64
		e := 0
		for _, ck := range cks {
			for ; e < len(evs) && evs[e].ledger <= ck.ledger; e++ {
				bal += evs[e].delta
			}
			if bal < 0 || uint64(bal) != ck.balance {
				return out, faultf("receipt %d (%s): balance after is %d, but the purse history of %s gives %d", ck.seq, ck.where, ck.balance, name, bal)
			}
		}
		out = append(out, a.purseTotals(name, evs, len(cks)))
	}
	return out, nil
}

// purseTotals sums one controller's purse history into its report.
func (a *journalAudit) purseTotals(name string, evs []purseEvent, receipts int) PurseReport {
	pr := PurseReport{Controller: name, Receipts: receipts}
	for _, ev := range evs {
		if ev.delta > 0 {
			pr.Funded += uint64(ev.delta)
		} else {
			pr.Charged += uint64(-ev.delta)
		}
	}
	for _, res := range a.reserves {
		if res.released && res.rec.Controller == name {
			// a release is a positive event: count it back out of Funded
			pr.Funded -= res.rec.Charge
			pr.Charged -= res.rec.Charge
		}
	}
	pr.Balance = int64(pr.Funded) - int64(pr.Charged)
	return pr
}
