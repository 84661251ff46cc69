package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// settle finishes a state replayed at open: the receipt chain must have
// no gap, and the last receipt signed is the last durable one.
func (st *state) settle() error {
	if len(st.Pending) != 0 {
		return fmt.Errorf("host journal: %w", hostlog.Faultf("the receipt chain has a gap: receipt %d is missing (%d later receipts are durable)", st.DurableSeq+1, len(st.Pending)))
	}
	st.SignedSeq, st.SignedHead = st.DurableSeq, st.DurableHead
	return nil
}

// replayer is Open's pass over the journal: the state it rebuilds and the
// operator key that grants and route records must be signed with. It is a
// hostlog.Visitor: its methods are the apply steps, one a kind.
type replayer struct {
	st  *state
	pub *wire.HybridPublicKey
}

// Apply applies one record (a history.State: package journal/history
// gives it every record of the journal after the state's mark, once).
func (rp *replayer) Apply(r journal.Record) error { return rp.record(r) }

// Encode is the state as a snapshot holds it.
func (rp *replayer) Encode() ([]byte, error) { return encodeState(rp.st) }

// record applies one journal record, naming it in any error.
func (rp *replayer) record(r journal.Record) error {
	// Every record's time is a time recorded: the clock never goes back
	// behind it (Store.clock).
	rp.st.Latest = max(rp.st.Latest, r.At)
	if err := hostlog.Visit(rp, r); err != nil {
		return recordError(r.Seq, r.Kind, err)
	}
	if len(rp.st.AskEvents) != 0 {
		return rp.st.sweepEvents()
	}
	return nil
}

func (rp *replayer) ControllerAdd(r journal.Record, b *hostlog.ControllerAdd) error {
	return rp.ControllerAddV2(r, b.Upgrade())
}

func (rp *replayer) ControllerAddV2(_ journal.Record, b *hostlog.ControllerAddV2) error {
	c, err := rp.st.checkControllerAdd(*b)
	if err != nil {
		return err
	}
	rp.st.addController(c)
	return nil
}

func (rp *replayer) ControllerControl(_ journal.Record, b *hostlog.ControllerControl) error {
	c, err := rp.st.checkControllerControl(*b)
	if err != nil {
		return err
	}
	c.Control = b.Control
	return nil
}

func (rp *replayer) PurseFund(_ journal.Record, b *hostlog.PurseFund) error {
	c, err := rp.st.controller(b.Controller)
	if err != nil {
		return err
	}
	c.Purse.Funded += b.Amount
	rp.st.seeLedger(b.Ledger)
	return nil
}

func (rp *replayer) PurseFreeze(_ journal.Record, b *hostlog.Purse) error {
	return rp.purseFrozen(b, true)
}

func (rp *replayer) PurseThaw(_ journal.Record, b *hostlog.Purse) error {
	return rp.purseFrozen(b, false)
}

func (rp *replayer) purseFrozen(b *hostlog.Purse, frozen bool) error {
	c, err := rp.st.controller(b.Controller)
	if err != nil {
		return err
	}
	c.Purse.Frozen = frozen
	return nil
}

func (rp *replayer) GrantIssue(_ journal.Record, b *hostlog.GrantIssue) error {
	g, err := rp.st.checkGrant(b.Grant, rp.pub)
	if err != nil {
		return err
	}
	rp.st.addGrant(g, b.Grant)
	return nil
}

func (rp *replayer) GrantRevoke(_ journal.Record, b *hostlog.GrantRevoke) error {
	g, ok := rp.st.Grants[b.ID]
	if !ok {
		return fmt.Errorf("revokes unknown grant %s", b.ID)
	}
	g.Revoked = true
	return nil
}

// reserve applies a reservation of either version.
func (rp *replayer) reserve(seq uint64, b *hostlog.Reserve) error {
	st := rp.st
	prior, err := st.askedAttempt(b.Attempt, seq, "reserved", fmt.Errorf("attempt %s reserved twice", b.Attempt))
	if err != nil {
		return err
	}
	c, err := st.controller(b.Controller)
	if err != nil {
		return err
	}
	g, ok := st.Grants[b.Grant]
	if !ok {
		return fmt.Errorf("attempt %s: unknown grant %s", b.Attempt, b.Grant)
	}
	c.Purse.Charged += b.Charge
	g.use(b.Day)
	// The journal's record times come from the machine's clock, a
	// reservation's day from the store's: never count on an earlier day.
	st.Latest = max(st.Latest, b.Day*msPerDay)
	st.seeLedger(b.Ledger)
	// Until a later record says otherwise, a reservation without an
	// outcome is uncertain: sending may have begun before a crash.
	a := &attempt{
		ID: b.Attempt, Controller: b.Controller, Application: b.Application, Grant: b.Grant, Charge: b.Charge,
		Day: b.Day, State: msg.StateUncertain, Detail: "the host stopped before recording an outcome", First: seq,
	}
	if prior != nil {
		a.Ask, a.AnsweredBy, a.First = prior.Ask, prior.AnsweredBy, prior.First
	}
	st.Attempts[b.Attempt] = a
	return nil
}

// notSentV1 applies a version 1 not-sent record (no receipt).
func (rp *replayer) NotSent(r journal.Record, b *hostlog.NotSent) error {
	return rp.NotSentV2(r, b.Upgrade())
}

func (rp *replayer) NotSentV2(r journal.Record, b *hostlog.NotSentV2) error {
	a, err := rp.st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	rp.st.release(a)
	a.State, a.Detail = msg.StateNotSent, b.Detail
	rp.st.seeLedger(b.Ledger)
	if b.Receipt != nil {
		a.EndAt = r.Place
		return rp.end(a, b.Seq, b.Receipt)
	}
	return rp.st.sweep(a)
}

func (rp *replayer) Uncertain(_ journal.Record, b *hostlog.Uncertain) error {
	a, err := rp.st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	a.Detail = b.Detail
	return nil
}

// outcomeV1 applies a version 1 outcome: it charged the whole reservation.
func (rp *replayer) Outcome(r journal.Record, b *hostlog.Outcome) error {
	a, err := rp.st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	return rp.OutcomeV2(r, b.Upgrade(a.Charge))
}

// outcome settles an answered attempt: its charge stays taken from the
// purse, the rest of its reservation is released.
func (rp *replayer) OutcomeV2(r journal.Record, b *hostlog.OutcomeV2) error {
	st := rp.st
	a, err := st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	if b.Charge > a.Charge {
		return fmt.Errorf("attempt %s: the outcome charges %d, more than its reservation of %d", b.Attempt, b.Charge, a.Charge)
	}
	if c := st.Controllers[a.Controller]; c != nil {
		c.Purse.Charged -= a.Charge - b.Charge
	}
	st.agentSettle(a, a.Charge-b.Charge)
	a.State, a.EndAt, a.Detail = msg.StateDefinite, r.Place, ""
	st.seeLedger(b.Ledger)
	return rp.end(a, b.Seq, b.Receipt)
}

// refused records an admitted attempt refused before anything was
// reserved: its id is taken (never dispatched again), nothing charged.
func (rp *replayer) Refused(r journal.Record, b *hostlog.Refused) error {
	st := rp.st
	prior, err := st.askedAttempt(b.Attempt, r.Seq, "refused", fmt.Errorf("attempt %s refused after it was recorded", b.Attempt))
	if err != nil {
		return err
	}
	if _, err := st.controller(b.Controller); err != nil {
		return err
	}
	a := &attempt{ID: b.Attempt, Controller: b.Controller, State: msg.StateRefused, Detail: b.Reason, EndAt: r.Place,
		Agent: b.Agent, Conversation: b.Conversation, First: r.Seq}
	if prior != nil {
		a.Ask, a.AnsweredBy, a.First = prior.Ask, prior.AnsweredBy, prior.First
	}
	st.Attempts[b.Attempt] = a
	st.seeLedger(b.Ledger)
	return rp.end(a, b.Seq, b.Receipt)
}

// end marks an ending record's receipt durable and sweeps its attempt
// into the history.
func (rp *replayer) end(a *attempt, seq uint64, signed []byte) error {
	if err := rp.receipt(seq, signed); err != nil {
		return err
	}
	return rp.st.sweep(a)
}

// receipt marks receipt seq durable, refusing one seen before.
func (rp *replayer) receipt(seq uint64, signed []byte) error {
	st := rp.st
	if seq <= st.DurableSeq || st.Pending[seq] != nil {
		return fmt.Errorf("receipt %d appears twice", seq)
	}
	st.markDurable(seq, msg.ReceiptHash(signed))
	return nil
}

func (rp *replayer) Checkpoint(_ journal.Record, b *hostlog.Checkpoint) error {
	if b.Seq > rp.st.Checkpoint {
		rp.st.Checkpoint = b.Seq
	}
	return nil
}

func (st *state) seeLedger(n uint64) {
	if n > st.Ledger {
		st.Ledger = n
	}
}

func (st *state) attemptIn(id string, want msg.State) (*attempt, error) {
	a, ok := st.Attempts[id]
	if !ok {
		return nil, fmt.Errorf("attempt %s has no reserve record", id)
	}
	if a.State != want {
		return nil, fmt.Errorf("attempt %s is %s, not %s", id, a.State, want)
	}
	return a, nil
}
