package audit

import (
	"math"
	"sort"
)

// The purse arithmetic, as the records come (operator's doc, the ledger):
// a receipt's BalanceAfter is its controller's balance over exactly the
// changes numbered at or below its ledger number, and the host numbers a
// change just before its append, so that journal order and ledger order
// differ only among the records being appended together. Ledger numbers
// are unique and the host uses every one in turn, so once 1..S are all
// claimed no later record can move a balance at or below S: S is settled,
// and a receipt at or below it is checked at once against the balance
// folded up to it. What is above S (the changes, and the receipts that
// wait for them) is what is under way, and is all the audit carries.
//
// A crash can leave a number never claimed (a batch torn after a later
// number was written): then S stops at the gap. So that what is carried
// stays bounded, a number more than ledgerWindow below the highest claimed
// is settled too, and a record claiming it is a fault: the host never has
// that many balance changes being appended at once.

// ledgerWindow bounds how far below the highest ledger number claimed a
// later record may claim one.
const ledgerWindow = 1 << 16

// ledgerBook is the store-wide ledger numbering and every controller's
// purse.
type ledgerBook struct {
	settled uint64            // every change numbered at or below it is known
	max     uint64            // the highest number claimed
	claimed map[uint64]uint64 // numbers above settled claimed so far -> journal record
	purses  map[string]*purseBook
	// due: something is to be settled at the end of the record (a
	// record's claim, change and check are one step: settle between them
	// and a check would miss its own record's change).
	due bool
}

// purseBook is one controller's purse: its totals, its balance over the
// settled changes, and the changes and balance checks above them.
type purseBook struct {
	funded, charged uint64 // every fund; every reservation less what was released of it
	receipts        int    // balance checks: one a receipt
	receipted       uint64 // what its receipts charge
	balance         int64  // over the changes folded (numbered at or below folded)
	folded          uint64
	events          []purseEvent   // numbered above folded
	checks          []balanceCheck // at ledger numbers above folded
	fault           error          // the first balance check that failed
}

func newLedgerBook() *ledgerBook {
	return &ledgerBook{claimed: map[uint64]uint64{}, purses: map[string]*purseBook{}}
}

func (l *ledgerBook) purse(name string) *purseBook {
	p := l.purses[name]
	if p == nil {
		p = &purseBook{}
		l.purses[name] = p
	}
	return p
}

// claim records that journal record seq carries ledger number n, which no
// other record may carry, and settles what it completes.
func (l *ledgerBook) claim(n, seq uint64) error {
	switch {
	case n == 0:
		return faultf("journal record %d carries no ledger number", seq)
	case n <= l.settled:
		return faultf("journal record %d carries ledger number %d, at or below %d, which the records before it settled (numbered, or passed by more than %d)", seq, n, l.settled, ledgerWindow)
	}
	if other, dup := l.claimed[n]; dup {
		return faultf("journal records %d and %d carry the same ledger number %d", other, seq, n)
	}
	l.claimed[n] = seq
	if n > l.max {
		l.max = n
	}
	for {
		if _, ok := l.claimed[l.settled+1]; !ok {
			break
		}
		delete(l.claimed, l.settled+1)
		l.settled++
	}
	if l.max > ledgerWindow && l.settled < l.max-ledgerWindow {
		l.settled = l.max - ledgerWindow
		if len(l.claimed) > 2*ledgerWindow {
			l.prune()
		}
	}
	l.due = true
	return nil
}

// endRecord settles what the record's step claimed or checked.
func (l *ledgerBook) endRecord() {
	if !l.due {
		return
	}
	l.due = false
	for _, p := range l.purses {
		p.settle(l.settled)
	}
}

// prune drops the claims the settled number passed.
func (l *ledgerBook) prune() {
	for n := range l.claimed {
		if n <= l.settled {
			delete(l.claimed, n)
		}
	}
}

// event adds a change to a purse's balance, at its ledger number (claimed
// first).
func (l *ledgerBook) event(name string, ev purseEvent) {
	p := l.purse(name)
	switch ev.kind {
	case eventFund:
		p.funded += uint64(ev.delta)
	case eventReserve:
		p.charged += uint64(-ev.delta)
	case eventRelease:
		p.charged -= uint64(ev.delta)
	}
	if ev.ledger <= p.folded {
		p.balance += ev.delta // never: a claim at or below settled is a fault
		return
	}
	p.events = append(p.events, ev)
}

// check adds a receipt's BalanceAfter, checked at the end of its record
// when its ledger number is settled.
func (l *ledgerBook) check(name string, ck balanceCheck, charge uint64) {
	p := l.purse(name)
	p.receipts++
	p.receipted += charge
	p.checks = append(p.checks, ck)
	l.due = l.due || ck.ledger <= l.settled
}

// settle folds the changes and checks the receipts at or below s, in
// ledger order: a receipt sees every change numbered at or below its own
// number, a change numbered the same included.
func (p *purseBook) settle(s uint64) {
	if s <= p.folded && len(p.checks) == 0 {
		return
	}
	sort.SliceStable(p.events, func(i, j int) bool { return p.events[i].ledger < p.events[j].ledger })
	sort.SliceStable(p.checks, func(i, j int) bool { return p.checks[i].ledger < p.checks[j].ledger })
	e, c := 0, 0
	for ; c < len(p.checks) && p.checks[c].ledger <= s; c++ {
		ck := p.checks[c]
		for ; e < len(p.events) && p.events[e].ledger <= ck.ledger; e++ {
			p.balance += p.events[e].delta
		}
		if p.fault == nil && (p.balance < 0 || uint64(p.balance) != ck.balance) {
			p.fault = faultf("receipt %d (%s): balance after is %d, but the purse history of %s gives %d", ck.seq, recordName(ck.record), ck.balance, ck.controller, p.balance)
		}
	}
	for ; e < len(p.events) && p.events[e].ledger <= s; e++ {
		p.balance += p.events[e].delta
	}
	p.events = append([]purseEvent(nil), p.events[e:]...)
	p.checks = append([]balanceCheck(nil), p.checks[c:]...)
	if s > p.folded {
		p.folded = s
	}
}

// finished is the purse as if every change were in: a copy, the carried
// purse unchanged.
func (p *purseBook) finished() *purseBook {
	q := *p
	q.events = append([]purseEvent(nil), p.events...)
	q.checks = append([]balanceCheck(nil), p.checks...)
	q.settle(math.MaxUint64)
	return &q
}
