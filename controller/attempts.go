package controller

import (
	"context"
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
	Resolved  msg.State `json:"resolved,omitempty"`  // set by Resolve: definite, abandoned or released
}

// findAttempt returns an attempt's begin: from the open set, or from the
// journal for one that has ended.
func (c *Controller) findAttempt(id string) (Attempt, ledger.Begin, error) {
	if a, b, ok := c.led.Open(id); ok {
		return a, b, nil
	}
	var b ledger.Begin
	var seq uint64
	err := c.j.Iterate(1, func(r journal.Record) error {
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
		return Attempt{}, b, fmt.Errorf("attempt %s: not in the controller journal", id)
	}
	return Attempt{ID: b.Attempt, Tool: b.Tool, Application: b.Application, Operation: b.Operation,
		RequestID: b.RequestID, Route: b.Route, Kind: b.Kind, State: stateEnded, BeginSeq: seq}, b, nil
}

// Inspect asks the host, over the attempt's forward channel, what it
// recorded of the attempt.
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
	f := c.fwd[b.Application]
	if f == nil {
		return msg.InspectResult{}, fmt.Errorf("attempt %s: application %q is no longer configured", b.Attempt, b.Application)
	}
	env, _, err := f.call(ctx, msg.TypeInspect, msg.Inspect{Attempt: b.Attempt})
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
// (its answer becomes the replay answer for the requestId), not-seen
// (abandoned) or not-sent (released). Nothing is released on the host's
// side and nothing is retried. An attempt the host reports uncertain or
// delivery-requested stays uncertain: Resolve refuses it.
func (c *Controller) Resolve(ctx context.Context, id, by string) (Inspection, error) {
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
	rec := ledger.Resolve{Attempt: id, By: by, Detail: ir.Detail}
	switch ir.State {
	case msg.StateDefinite:
		rc, err := c.verifyReceipt(ir.Receipt, id, b.RequestSHA256, ir.Body, ir.Status)
		if err == nil {
			err = c.checkReceiptConsent(rc, b)
		}
		if err != nil {
			c.log.Error("RECEIPT REFUSED: the host's record of an uncertain attempt carries a receipt that does not verify", "attempt", id, "err", err)
			return ins, fmt.Errorf("%w: attempt %s: the host's receipt does not verify: %w", ErrNotResolvable, id, err)
		}
		rec.State, rec.Status, rec.Body, rec.Receipt, rec.Charge = msg.StateDefinite, ir.Status, ir.Body, ir.Receipt, rc.Charge
	case msg.StateNotSeen:
		rec.State = msg.StateAbandoned
	case msg.StateRefused, msg.StateNotSent:
		// Ended after admission with nothing charged; a host of version 2
		// receipts shows the receipt, checked like one in a dispatch answer.
		if rec.Receipt, err = c.checkInspectedEnd(b, ir); err != nil {
			return ins, fmt.Errorf("%w: attempt %s: the host's receipt does not verify: %w", ErrNotResolvable, id, err)
		}
		rec.State = msg.StateReleased
		if ir.State == msg.StateRefused {
			rec.State = msg.StateAbandoned
		}
	default:
		return ins, fmt.Errorf("%w: attempt %s: the host reports it %s; it stays uncertain (the operator resolves it on the host)", ErrNotResolvable, id, ir.State)
	}
	seq, err := c.j.Append(ledger.KindResolve, rec)
	if err != nil {
		return ins, fmt.Errorf("attempt %s: journaling the resolution: %w", id, err)
	}
	c.led.Resolved(rec, seq)
	c.log.Info("attempt resolved", "attempt", id, "state", rec.State, "by", by)
	ins.Resolved = rec.State
	return ins, nil
}
