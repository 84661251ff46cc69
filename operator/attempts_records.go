package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// reserveV1 applies a first-version reservation (no request bytes).
func (rp *replayer) Reserve(r journal.Record, b *hostlog.Reserve) error {
	if err := rp.reserve(r.Seq, b); err != nil {
		return err
	}
	rp.st.Attempts[b.Attempt].ReserveAt = r.Place
	return nil
}

// reserveV2 applies a reservation that kept its request; the request
// stays in the journal, where a redelivery reads it.
func (rp *replayer) ReserveV2(r journal.Record, b *hostlog.ReserveV2) error {
	if err := b.CheckRequest(); err != nil {
		return fmt.Errorf("attempt %s: %w", b.Attempt, err)
	}
	if b.Agent != "" {
		if err := hostlog.ValidDispatchAgent(b.Agent); err != nil {
			return fmt.Errorf("attempt %s: %w", b.Attempt, err)
		}
	}
	if err := rp.Reserve(r, b.V1()); err != nil {
		return err
	}
	// The agent's counts come from the journal: a restart refills none.
	a := rp.st.Attempts[b.Attempt]
	a.Agent, a.Conversation = b.Agent, b.Conversation
	rp.st.agentHold(b.Attempt, b.Controller, b.Agent, b.Conversation, b.Day, b.Charge)
	return nil
}

func (rp *replayer) Redeliver(_ journal.Record, b *hostlog.Redeliver) error {
	a, err := rp.st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	a.Resolution, a.RedeliveredBy = redeliveredLine(b.By, b.Reason), b.By
	return nil
}

func (rp *replayer) Resolve(r journal.Record, b *hostlog.Resolve) error {
	st := rp.st
	a, err := st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	switch b.State {
	case msg.StateReleased:
		st.release(a)
	case msg.StatePerformed:
	default:
		return fmt.Errorf("attempt %s: resolved to %q, which is neither %s nor %s", b.Attempt, b.State, msg.StateReleased, msg.StatePerformed)
	}
	if b.Seq <= st.DurableSeq || st.Pending[b.Seq] != nil {
		return fmt.Errorf("receipt %d appears twice", b.Seq)
	}
	a.State, a.EndAt, a.Detail = b.State, r.Place, resolvedLine(b.State, b.By, b.Reason)
	st.markDurable(b.Seq, msg.ReceiptHash(b.Receipt))
	st.seeLedger(b.Ledger)
	return st.sweep(a)
}
