package audit

import (
	"fmt"
	"sort"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// journalAudit is `receipts verify`'s pass over the host journal, a
// record at a time: each step checks its record against what the records
// before it left (a hostlog.Visitor: one method a kind; those no evidence
// of receipts or purses are in quiet.go) and returns the first fault it
// finds; what can only be checked once later records are in (the chain's
// gaps, the balances above the settled ledger number) is carried and
// checked as they come, or at the end (finish). What it carries is
// bounded by what is under way, never by history: the open reservations,
// the chain's end, the purses' totals and unsettled changes, the asks not
// done, the agents' counts. That is what a verified point holds
// (point.go). It is built and used by one call, so it has no lock.
type journalAudit struct {
	live        bool                     // the journal was read while its owner ran (journal.Live)
	pub         *wire.HybridPublicKey    // the operator key, which signs checkpoints and agents' limits
	hostRing    *wire.Keyring            // the host's receipt key (the operator key's Ed25519 half)
	dispatch    map[string]*wire.Keyring // controller -> its pinned dispatch key, which signs consents
	dispatchKey map[string][]byte        // controller -> that key's encoding, for a point
	dispatchKID map[string]string        // controller -> that key's kid, for the report
	ctrlOrder   []string                 // controllers in the order they were added
	reserves    map[string]*auditReserve // attempt -> its reservation, while it is open
	chain       *receiptChain
	ledger      *ledgerBook
	agents      []AgentReport
	principals  *principalCheck // each controller's first receipt naming an agent
	findings    []string        // consents that do not hold, in journal order
	agentFinds  []string        // receipts whose agent is not their consent's principal, in chain order
	asks        *askAudit
	records     uint64 // the last journal record applied

	// What one run saw end, which a point does not carry: an attempt
	// reused after it ended is a fault of this run, of one from a point
	// only when it ended after the point (DESIGN.md section 13).
	ended map[string]endKind
	// keep, for an export, every receipt and checkpoint, in journal order.
	keep    bool
	kept    []chainReceipt
	keptCPs []chainCheckpoint
}

// endKind is how an attempt ended.
type endKind int

const (
	endOutcome endKind = iota + 1
	endReleased
	endRefused
)

// auditReserve is one open reservation and what became of it so far.
type auditReserve struct {
	rec    hostlog.Reserve
	seq    uint64 // its journal record
	detail string // the last uncertain record's detail
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
	ledger     uint64
	balance    uint64
	seq        uint64 // the receipt
	record     uint64 // its journal record
	controller string
}

func newJournalAudit(pub *wire.HybridPublicKey) *journalAudit {
	return &journalAudit{
		pub:         pub,
		hostRing:    wire.NewKeyring(pub.Ed25519()),
		dispatch:    map[string]*wire.Keyring{},
		dispatchKey: map[string][]byte{},
		dispatchKID: map[string]string{},
		reserves:    map[string]*auditReserve{},
		chain:       newReceiptChain(),
		ledger:      newLedgerBook(),
		asks:        newAskAudit(),
		principals:  newPrincipalCheck(),
		ended:       map[string]endKind{},
	}
}

// recordWhere names a journal record in a fault.
func recordWhere(r journal.Record) string { return recordName(r.Seq) }

// recordName names journal record seq.
func recordName(seq uint64) string { return fmt.Sprintf("journal record %d", seq) }

// record verifies one journal record.
func (a *journalAudit) record(r journal.Record) error {
	rec, err := hostlog.Decode(r)
	if err != nil {
		return faultf("%s: %v", recordWhere(r), err)
	}
	a.records = r.Seq
	if rec == nil {
		return nil // the journal's own
	}
	err = rec.Visit(a)
	a.ledger.endRecord()
	return err
}

// claimLedger records that journal record seq carries ledger number n,
// which no other record may carry (ledger.go).
func (a *journalAudit) claimLedger(n, seq uint64) error { return a.ledger.claim(n, seq) }

// event is a change to controller's purse.
func (a *journalAudit) event(controller string, ev purseEvent) { a.ledger.event(controller, ev) }

// end closes an attempt: its reservation (if any) is no longer open, and
// its ask, once decided, is done.
func (a *journalAudit) end(attempt string, how endKind) {
	delete(a.reserves, attempt)
	a.ended[attempt] = how
	a.asks.ended(attempt)
}

// reused is the fault of a record that starts what an earlier one ended or
// holds.
func (a *journalAudit) reused(attempt string) bool {
	return a.reserves[attempt] != nil || a.ended[attempt] != 0
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
	return a.pinDispatch(b.Name, ck.Dispatch, where)
}

// pinDispatch pins controller name's dispatch key (its encoding).
func (a *journalAudit) pinDispatch(name string, key []byte, where string) error {
	k, err := wire.ParsePublicKey(key)
	if err != nil {
		return faultf("%s: %v", where, err)
	}
	a.dispatch[name] = wire.NewKeyring(k)
	a.dispatchKey[name] = key
	a.dispatchKID[name] = k.KID().String()
	a.ctrlOrder = append(a.ctrlOrder, name)
	return nil
}

func (a *journalAudit) PurseFund(r journal.Record, b *hostlog.PurseFund) error {
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	a.event(b.Controller, purseEvent{b.Ledger, int64(b.Amount), eventFund})
	return nil
}

func (a *journalAudit) Reserve(r journal.Record, b *hostlog.Reserve) error {
	if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
		return err
	}
	if a.reused(b.Attempt) {
		return faultf("%s: attempt %s reserved twice", recordWhere(r), b.Attempt)
	}
	dk := a.dispatch[b.Controller]
	if dk == nil {
		return faultf("%s: attempt %s reserves from unknown controller %s", recordWhere(r), b.Attempt, b.Controller)
	}
	a.reserves[b.Attempt] = &auditReserve{rec: *b, seq: r.Seq}
	a.event(b.Controller, purseEvent{b.Ledger, -int64(b.Charge), eventReserve})
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
	if res == nil {
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
		held = append(held, res)
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
	out := make([]ConsentReport, 0, len(a.ctrlOrder))
	for _, name := range a.ctrlOrder {
		out = append(out, ConsentReport{Controller: name, Receipts: a.ledger.purse(name).receipts, Checked: true, DispatchID: a.dispatchKID[name]})
	}
	return out
}

func (a *journalAudit) Checkpoint(r journal.Record, b *hostlog.Checkpoint) error {
	cp := chainCheckpoint{signed: b.Checkpoint, where: recordWhere(r), order: int(r.Seq)}
	if a.keep {
		a.keptCPs = append(a.keptCPs, cp)
	}
	a.chain.checkpoint(cp, a.pub)
	return nil
}

// keepReceipt takes a receipt its record's step verified: into the chain,
// and its balance into the purse arithmetic at ledger number ledger.
func (a *journalAudit) keepReceipt(r journal.Record, signed []byte, rc msg.Receipt, ledger uint64) {
	c := chainReceipt{signed: signed, r: rc, where: recordWhere(r), order: int(r.Seq)}
	if a.keep {
		a.kept = append(a.kept, c)
	}
	a.chain.add(c, a.linked)
	a.ledger.check(rc.Controller, balanceCheck{ledger: ledger, balance: rc.BalanceAfter, seq: rc.Seq, record: r.Seq, controller: rc.Controller}, rc.Charge)
}

// linked counts a receipt the chain linked, in chain order, by agent.
func (a *journalAudit) linked(c chainReceipt) {
	var f string
	a.agents, f = agentCount(a.agents, c, a.dispatch[c.r.Controller])
	if f != "" {
		a.agentFinds = append(a.agentFinds, f)
	}
	if f := a.principals.check(c); f != "" {
		a.agentFinds = append(a.agentFinds, f)
	}
}

// purses does the purse arithmetic of what is not settled yet, in ledger
// order, per controller, and the charges (checkCharged). With a fault it
// returns the purses reported before it. It changes nothing carried.
func (a *journalAudit) purses() ([]PurseReport, error) {
	var out []PurseReport
	for _, name := range a.ctrlOrder {
		p := a.ledger.purse(name).finished()
		if p.fault != nil {
			return out, p.fault
		}
		pr := PurseReport{Controller: name, Funded: p.funded, Charged: p.charged, Receipts: p.receipts}
		pr.Balance = int64(pr.Funded) - int64(pr.Charged)
		if err := a.checkCharged(pr, p.receipted); err != nil {
			return out, err
		}
		out = append(out, pr)
	}
	return out, nil
}

// checkCharged holds a controller's charges to its receipts: what the
// purse history charged is what its receipts charge plus what its open
// reservations still hold. A reservation released or settled without a
// receipt saying so, or a receipt charging what no reservation took,
// breaks it.
func (a *journalAudit) checkCharged(pr PurseReport, receipted uint64) error {
	var held uint64
	for _, res := range a.reserves {
		if res.rec.Controller == pr.Controller {
			held += res.rec.Charge
		}
	}
	if receipted+held != pr.Charged {
		return faultf("purse of %s: its history charges %d, but its receipts charge %d and its open reservations hold %d", pr.Controller, pr.Charged, receipted, held)
	}
	return nil
}
