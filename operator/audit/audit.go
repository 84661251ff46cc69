package audit

import (
	"fmt"
	"sort"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// journalAudit is `receipts verify`'s pass over the host journal: the
// evidence it gathers, record by record, for the receipt chain and the
// purse arithmetic. It is a hostlog.Visitor: its methods are the verify
// steps, one a kind (those no evidence of receipts or purses are in
// quiet.go); each returns the first fault it finds. It is built and used by one call of
// auditStore, so it has no lock.
type journalAudit struct {
	live        bool                     // the journal was read while its owner ran (journal.Live)
	pub         *wire.HybridPublicKey    // the operator key, which signs checkpoints and agents' limits
	hostRing    *wire.Keyring            // the host's receipt key (the operator key's Ed25519 half)
	dispatch    map[string]*wire.Keyring // controller -> its pinned dispatch key, which signs consents
	dispatchKID map[string]string        // controller -> that key's kid, for the report
	ctrlOrder   []string                 // controllers in the order they were added
	reserves    map[string]*auditReserve // attempt -> its reservation
	events      map[string][]purseEvent  // controller -> every change to its balance
	checks      map[string][]balanceCheck
	ledgers     map[uint64]uint64 // ledger number -> journal seq
	refusedIDs  map[string]bool   // attempts refused before anything was reserved
	receipts    []chainReceipt    // in journal order
	checkpoints []chainCheckpoint // in journal order
	findings    []string          // consents that do not hold, in journal order
	asks        *askAudit         // agents' limits and asks (verify_asks.go)
}

// auditReserve is one reservation and what became of it.
type auditReserve struct {
	rec      hostlog.Reserve
	seq      uint64 // its journal record
	released bool   // a not-sent record gave the charge back
	outcome  bool   // an outcome record receipted it
	detail   string // the last uncertain record's detail
	// redeliveredBy is the last redeliver record's resolver: the receipt
	// that ends a redelivery names it, a first delivery's names none.
	redeliveredBy string
}

// purseEvent is one change to a purse's balance, at its ledger number.
type purseEvent struct {
	ledger uint64
	delta  int64
	kind   purseEventKind
}

// purseEventKind is what moved a balance: a fund, a reservation, or the
// release of a reservation or of its part an outcome did not charge.
type purseEventKind int

const (
	eventFund purseEventKind = iota
	eventReserve
	eventRelease
)

// balanceCheck is a receipt's BalanceAfter, to be checked against the
// purse's history up to its outcome's ledger number.
type balanceCheck struct {
	ledger  uint64
	balance uint64
	seq     uint64
	where   string
}

func newJournalAudit(pub *wire.HybridPublicKey) *journalAudit {
	return &journalAudit{
		pub:         pub,
		hostRing:    wire.NewKeyring(pub.Ed25519()),
		dispatch:    map[string]*wire.Keyring{},
		dispatchKID: map[string]string{},
		reserves:    map[string]*auditReserve{},
		refusedIDs:  map[string]bool{},
		events:      map[string][]purseEvent{},
		checks:      map[string][]balanceCheck{},
		ledgers:     map[uint64]uint64{},
		asks:        newAskAudit(),
	}
}

// recordWhere names a journal record in a fault.
func recordWhere(r journal.Record) string { return fmt.Sprintf("journal record %d", r.Seq) }

// record verifies one journal record.
func (a *journalAudit) record(r journal.Record) error {
	rec, err := hostlog.Decode(r)
	if err != nil {
		return faultf("%s: %v", recordWhere(r), err)
	}
	if rec == nil {
		return nil // the journal's own
	}
	return rec.Visit(a)
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

func (a *journalAudit) ControllerAdd(r journal.Record, b *hostlog.ControllerAdd) error {
	return a.ControllerAddV2(r, b.Upgrade())
}

func (a *journalAudit) ControllerAddV2(r journal.Record, b *hostlog.ControllerAddV2) error {
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

func (a *journalAudit) PurseFund(r journal.Record, b *hostlog.PurseFund) error {
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	a.events[b.Controller] = append(a.events[b.Controller], purseEvent{b.Ledger, int64(b.Amount), eventFund})
	return nil
}

func (a *journalAudit) Reserve(r journal.Record, b *hostlog.Reserve) error {
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	if a.reserves[b.Attempt] != nil || a.refusedIDs[b.Attempt] {
		return faultf("%s: attempt %s reserved twice", recordWhere(r), b.Attempt)
	}
	dk := a.dispatch[b.Controller]
	if dk == nil {
		return faultf("%s: attempt %s reserves from unknown controller %s", recordWhere(r), b.Attempt, b.Controller)
	}
	a.reserves[b.Attempt] = &auditReserve{rec: *b, seq: r.Seq}
	a.events[b.Controller] = append(a.events[b.Controller], purseEvent{b.Ledger, -int64(b.Charge), eventReserve})
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
func checkReserveConsent(b *hostlog.Reserve, dispatch *wire.Keyring) error {
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
func (a *journalAudit) Uncertain(r journal.Record, b *hostlog.Uncertain) error {
	res := a.reserves[b.Attempt]
	if res == nil || res.released || res.outcome {
		return faultf("%s: marks attempt %s uncertain, which holds no open reservation", recordWhere(r), b.Attempt)
	}
	res.detail = b.Detail
	return nil
}

// held is every reservation with neither an outcome nor a release, in
// journal order: its charge stays taken from the purse with no receipt.
func (a *journalAudit) held() []*auditReserve {
	var held []*auditReserve
	for _, res := range a.reserves {
		if !res.released && !res.outcome {
			held = append(held, res)
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i].seq < held[j].seq })
	return held
}

// heldLine is the finding of a held reservation.
func heldLine(res *auditReserve) string {
	detail := res.detail
	if detail == "" {
		detail = "no outcome recorded"
	}
	held := fmt.Sprintf("%d charged without a receipt, still held", res.rec.Charge)
	if res.rec.Charge == 0 {
		held = "free, with no outcome: still open"
	}
	return fmt.Sprintf("reservation of attempt %s (journal record %d): %s (%s)", res.rec.Attempt, res.seq, held, trunc(detail, 120))
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

func (a *journalAudit) Checkpoint(r journal.Record, b *hostlog.Checkpoint) error {
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
		pr := a.purseTotals(name, evs, len(cks))
		if err := a.checkCharged(pr); err != nil {
			return out, err
		}
		out = append(out, pr)
	}
	return out, nil
}

// purseTotals sums one controller's purse history into its report:
// funded is every fund, charged every reservation less what was released
// of it.
func (a *journalAudit) purseTotals(name string, evs []purseEvent, receipts int) PurseReport {
	pr := PurseReport{Controller: name, Receipts: receipts}
	for _, ev := range evs {
		switch ev.kind {
		case eventFund:
			pr.Funded += uint64(ev.delta)
		case eventReserve:
			pr.Charged += uint64(-ev.delta)
		case eventRelease:
			pr.Charged -= uint64(ev.delta)
		}
	}
	pr.Balance = int64(pr.Funded) - int64(pr.Charged)
	return pr
}

// checkCharged holds a controller's charges to its receipts: what the
// purse history charged is what its receipts charge plus what its open
// reservations still hold. A reservation released or settled without a
// receipt saying so, or a receipt charging what no reservation took,
// breaks it.
func (a *journalAudit) checkCharged(pr PurseReport) error {
	var receipted, held uint64
	for _, c := range a.receipts {
		if c.r.Controller == pr.Controller {
			receipted += c.r.Charge
		}
	}
	for _, res := range a.reserves {
		if res.rec.Controller == pr.Controller && !res.released && !res.outcome {
			held += res.rec.Charge
		}
	}
	if receipted+held != pr.Charged {
		return faultf("purse of %s: its history charges %d, but its receipts charge %d and its open reservations hold %d", pr.Controller, pr.Charged, receipted, held)
	}
	return nil
}
