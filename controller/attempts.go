package controller

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// stateEnded is how an attempt that is no longer open reads in an
// inspection: its result or resolution is in the journal.
const stateEnded msg.State = "ended"

// ErrNotResolvable is wrapped when an attempt cannot be resolved: the host
// still reports it uncertain, or it is not open.
var ErrNotResolvable = errors.New("attempt not resolvable")

// Inspection is what the controller and the host know of one attempt.
type Inspection struct {
	Attempt   Attempt   `json:"attempt"`
	HostState msg.State `json:"hostState"`           // as the host reports it
	Status    int       `json:"status,omitempty"`    // the host's recorded answer, when definite
	ReceiptID string    `json:"receiptId,omitempty"` // hex SHA-256 of the host's signed receipt
	Detail    string    `json:"detail,omitempty"`    // the host's detail line
	Resolved  msg.State `json:"resolved,omitempty"`  // set by Resolve: definite, abandoned, released or performed
}

// findAttempt returns an attempt's begin: from the open set, or from the
// live journal for one that has ended; one whose begin is archived is
// refused, naming its archive.
func (c *Controller) findAttempt(id string) (Attempt, ledger.Begin, error) {
	if a, b, ok := c.led.Open(id); ok {
		return a, b, nil
	}
	var b ledger.Begin
	var seq uint64
	err := c.j.Iterate(0, func(r journal.Record) error {
		if r.Kind != ledger.KindBegin {
			return nil
		}
		var x ledger.Begin
		if err := ledger.Decode(r, &x); err != nil {
			return err
		}
		if x.Attempt == id {
			b, seq = x, r.Seq
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return Attempt{}, b, err
	}
	if seq == 0 {
		name, err := c.archivedAttempt(id)
		if err != nil {
			return Attempt{}, b, err
		}
		if name != "" {
			return Attempt{}, b, refusedf("attempt %s is archived in %s", id, name)
		}
		return Attempt{}, b, fmt.Errorf("attempt %s: not in the controller journal", id)
	}
	return ledger.AttemptOf(&b, seq, stateEnded, ""), b, nil
}

// Inspect asks the host, over the control channel, what it recorded of
// the attempt.
func (c *Controller) Inspect(ctx context.Context, id string) (Inspection, error) {
	a, b, err := c.findAttempt(id)
	if err != nil {
		return Inspection{}, err
	}
	ir, err := c.askHost(ctx, b)
	if err != nil {
		return Inspection{Attempt: a}, err
	}
	return inspection(a, ir), nil
}

func inspection(a Attempt, ir msg.InspectResult) Inspection {
	ins := Inspection{Attempt: a, HostState: ir.State, Status: ir.Status, Detail: ir.Detail}
	if ir.Receipt != nil {
		ins.ReceiptID = fmt.Sprintf("%x", msg.ReceiptHash(ir.Receipt))
	}
	return ins
}

func (c *Controller) askHost(ctx context.Context, b ledger.Begin) (msg.InspectResult, error) {
	// The control channel: the attempt's route may have left the table.
	env, _, err := c.ctl.call(ctx, msg.TypeInspect, msg.Inspect{Attempt: b.Attempt})
	if err != nil {
		return msg.InspectResult{}, fmt.Errorf("attempt %s: asking the host: %w", b.Attempt, err)
	}
	switch env.T {
	case msg.TypeInspectResult:
		var ir msg.InspectResult
		if err := env.Decode(&ir); err != nil {
			return ir, fmt.Errorf("attempt %s: host answer: %w", b.Attempt, err)
		}
		if ir.Attempt != b.Attempt {
			return ir, fmt.Errorf("attempt %s: the host answered for attempt %s", b.Attempt, ir.Attempt)
		}
		return ir, nil
	case msg.TypeRefused:
		var r msg.Refusal
		if err := env.Decode(&r); err != nil {
			return msg.InspectResult{}, fmt.Errorf("attempt %s: host refusal: %w", b.Attempt, err)
		}
		return msg.InspectResult{}, fmt.Errorf("attempt %s: the host refused inspection: %w", b.Attempt, &r)
	default:
		return msg.InspectResult{}, fmt.Errorf("attempt %s: unexpected host frame %q", b.Attempt, env.T)
	}
}

// Resolve records what the host says of an uncertain attempt: definite
// (its answer becomes the replay answer for the requestId: the first
// delivery's or an operator's redelivery), not-seen (abandoned), not-sent
// (released), or the host operator's word: released (not performed,
// nothing charged) or performed (charged, its answer never recorded),
// each with its verified receipt. Nothing is released on the host's side
// and nothing is retried. An attempt the host reports uncertain or
// delivery-requested stays uncertain: Resolve refuses it, naming the
// operator's command.
func (c *Controller) Resolve(ctx context.Context, id, by string) (Inspection, error) {
	return c.resolve(ctx, id, by, true)
}

// resolve is Resolve; abandon says whether a host that has not seen the
// attempt ends it abandoned. An agent's call does not: "not seen" is not
// final (a dispatch may still be on its way into the host's admission),
// so only an explicit attempts resolve abandons an attempt; every other
// answer it records is durable on the host.
func (c *Controller) resolve(ctx context.Context, id, by string, abandon bool) (Inspection, error) {
	a, b, ok := c.led.Open(id)
	if !ok || a.State != msg.StateUncertain {
		state := stateEnded
		if ok {
			state = a.State
		}
		return Inspection{}, fmt.Errorf("%w: attempt %s is %s, not uncertain", ErrNotResolvable, id, state)
	}
	ir, err := c.askHost(ctx, b)
	if err != nil {
		return Inspection{Attempt: a}, err
	}
	ins := inspection(a, ir)
	if ir.State == msg.StateAwaitingApproval {
		if err := c.awaitedAfterAll(a, ir); err != nil {
			return ins, err
		}
		ins.Resolved = msg.StateAwaitingApproval
		return ins, nil
	}
	if done, err := c.deniedAfterAll(b, ir); done || err != nil {
		ins.Resolved = msg.StateRefused
		return ins, err
	}
	if ir.State == msg.StateNotSeen && !abandon {
		return ins, fmt.Errorf("%w: attempt %s: the host has not seen it; only steward-controller attempts resolve abandons it", ErrNotResolvable, id)
	}
	consented := c.led.ConsentKnown(id)
	if unreceipted(ir) && consented {
		return ins, c.consentedUnreceipted(id, ir.State)
	}
	if ir.State == msg.StateNotSeen && consented {
		c.log.Warn("steward-controller: abandoning an attempt this controller consented to: the host holds no consent of it (it answers pending for one it holds); a later consent of its requestId shows in receipts compare", "attempt", id)
	}
	rec, err := c.resolution(b, ir, by)
	if err != nil {
		return ins, err
	}
	place, err := c.j.AppendAt(ledger.KindResolveV2, rec)
	if err != nil {
		return ins, fmt.Errorf("attempt %s: journaling the resolution: %w", id, err)
	}
	c.led.Resolved(rec, place)
	c.log.Info("attempt resolved", "attempt", id, "state", rec.State, "by", by, "hostResolvedBy", rec.ResolvedBy)
	ins.Resolved = rec.State
	return ins, nil
}

// awaitedAfterAll records that uncertain attempt a awaits approval after
// all: the host journaled its ask and then died, or its answer was lost, so
// that the awaiting answer never arrived. The host holds nothing for it and
// has asked no consent (it asks one only when a collect of an approved ask
// goes on, and only this controller collects), so the attempt is what an
// awaiting record makes it: a call again with its requestId collects it.
// Its Resolved is then StateAwaitingApproval: it is not resolved, but no
// longer uncertain either.
func (c *Controller) awaitedAfterAll(a ledger.Attempt, ir msg.InspectResult) error {
	if err := checkTicket(ir.Ask); err != nil {
		return fmt.Errorf("%w: attempt %s: the host reports it awaiting approval, but %v", ErrNotResolvable, a.ID, err)
	}
	if c.led.AskOf(a.ID) != "" && !c.led.NeedsConsentRecord(a.ID) {
		// Its consent is journaled: the host died after this controller
		// consented and before it reserved. The host would need a second
		// consent, which the ledger refuses; nothing here can know more.
		return fmt.Errorf("%w: attempt %s: the host reports it awaiting approval (ask %s), but this controller consented to it already; it stays uncertain", ErrNotResolvable, a.ID, ir.Ask.ID)
	}
	rec := ledger.Awaiting{Attempt: a.ID, Ask: ir.Ask.ID, ExpiresAt: ir.Ask.ExpiresAt}
	if _, err := c.j.Append(ledger.KindAwaiting, rec); err != nil {
		return fmt.Errorf("attempt %s: journaling its awaiting record: %w", a.ID, err)
	}
	c.led.Awaited(rec)
	c.log.Info("an uncertain attempt awaits approval after all: the host journaled its ask", "attempt", a.ID, "ask", rec.Ask)
	return nil
}

// resolution is the record of what the host reports of uncertain attempt
// b, or why it cannot be recorded: a receipt that does not verify, or a
// host that still does not know.
func (c *Controller) resolution(b ledger.Begin, ir msg.InspectResult, by string) (ledger.ResolveV2, error) {
	id := b.Attempt
	rec := ledger.ResolveV2{Attempt: id, By: by, Detail: ir.Detail}
	switch ir.State {
	case msg.StateDefinite:
		rc, err := c.verifyReceipt(ir.Receipt, id, b.RequestSHA256, ir.Body, ir.Status)
		if err == nil {
			err = checkRedeliveredBy(rc, ir.RedeliveredBy)
		}
		if ask := c.led.AskOf(id); err == nil && ask != "" {
			// An attempt that awaited approval: its answer's receipt names
			// the ask (a begin whose awaiting record failed has none here).
			err = checkReceiptAsk(rc, ask)
		}
		if err == nil {
			err = c.checkReceiptConsent(rc, b)
		}
		if err != nil {
			c.log.Error("RECEIPT REFUSED: the host's record of an uncertain attempt carries a receipt that does not verify", "attempt", id, "err", err)
			return rec, fmt.Errorf("%w: attempt %s: the host's receipt does not verify: %w", ErrNotResolvable, id, err)
		}
		rec.State, rec.Status, rec.Body, rec.Receipt, rec.Charge, rec.ResolvedBy = msg.StateDefinite, ir.Status, ir.Body, ir.Receipt, rc.Charge, rc.ResolvedBy
	case msg.StateReleased, msg.StatePerformed:
		rc, err := c.verifyResolutionReceipt(ir, b)
		if err != nil {
			c.log.Error("RECEIPT REFUSED: the host operator's resolution carries a receipt that does not verify", "attempt", id, "err", err)
			return rec, fmt.Errorf("%w: attempt %s: the host's receipt does not verify: %w", ErrNotResolvable, id, err)
		}
		rec.State, rec.Receipt, rec.Charge, rec.ResolvedBy, rec.Reason = ir.State, ir.Receipt, rc.Charge, rc.ResolvedBy, rc.Reason
	case msg.StateNotSeen:
		rec.State = msg.StateAbandoned
	case msg.StateRefused, msg.StateNotSent:
		// Ended after admission with nothing charged; a host of version 2
		// receipts shows the receipt, checked like one in a dispatch answer.
		receipt, err := c.checkInspectedEnd(b, ir)
		if err != nil {
			return rec, fmt.Errorf("%w: attempt %s: the host's receipt does not verify: %w", ErrNotResolvable, id, err)
		}
		rec.Receipt = receipt
		rec.State = msg.StateReleased
		if ir.State == msg.StateRefused {
			rec.State = msg.StateAbandoned
		}
	default:
		return rec, fmt.Errorf("%w: attempt %s: the host reports it %s; it stays uncertain until the operator resolves it on the host (steward-operator attempts resolve %s --redeliver|--release|--charge --reason TEXT)", ErrNotResolvable, id, ir.State, id)
	}
	return rec, nil
}

// learnResolution asks the host about an uncertain attempt that decides a
// new call's requestId, and journals its resolution when the host has one
// (an operator resolved it, or the host settled it): true when the attempt
// is no longer uncertain, so the call is decided afresh.
func (c *Controller) learnResolution(ctx context.Context, id string) bool {
	_, err := c.resolve(ctx, id, "agent call", false)
	if err == nil {
		return true
	}
	if a, _, ok := c.led.Open(id); !ok || a.State != msg.StateUncertain {
		return true // resolved meanwhile by another call or command
	}
	if !errors.Is(err, ErrNotResolvable) {
		c.log.Warn("could not ask the host about an uncertain attempt", "attempt", id, "err", err)
	}
	return false
}

// CodeReleased is the refusal code of a call whose requestId's attempt the
// host's operator released: it was not performed and nothing was charged.
const CodeReleased = "released"

// operatorResolution answers a call with requestID whose attempt the
// host's operator resolved (the resolve record at seq; archived, a
// refusal naming the archive): after a release, a
// refusal with the operator's reason, nothing charged; after a charge, a
// result saying it was performed and charged, its answer never recorded.
func (c *Controller) operatorResolution(requestID, attempt string, at journal.Place) *ToolResult {
	rec, err := c.j.ReadAt(at)
	seq := at.Seq
	if t := archivedAnswer(err, requestID, attempt); t != nil {
		return t
	}
	var r ledger.ResolveV2
	if err == nil && rec.Kind != ledger.KindResolveV2 {
		err = fmt.Errorf("record %d is a %s, not a resolution", seq, rec.Kind)
	}
	if err == nil {
		err = ledger.Decode(rec, &r)
	}
	if err != nil {
		c.log.Error("reading the operator's resolution", "attempt", attempt, "seq", seq, "err", err)
		return refused(msg.CodeJournal, "the recorded resolution could not be read", attempt)
	}
	receipt := hex.EncodeToString(msg.ReceiptHash(r.Receipt))
	if r.State == msg.StateReleased {
		t := refused(CodeReleased, "released by the operator: "+r.Reason+"; nothing was charged", attempt)
		t.ReceiptID = receipt
		return t
	}
	charge := r.Charge
	return &ToolResult{Outcome: msg.StatePerformed, AttemptID: attempt, ReceiptID: receipt, Charge: &charge,
		Detail: fmt.Sprintf("performed and charged %d by the operator's word (%s), but its answer was never recorded; the host's receipt says: %s", charge, r.ResolvedBy, r.Reason)}
}
