package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/wire/msg"
)

// Approvals on the controller (DESIGN.md section 5, "Approvals"): a call
// to an operation the operator's limits mark is answered by the host
// awaiting approval, with its ask. The controller journals an awaiting
// record and parks the agent's MCP call: it waits for the host's verdict
// push on the reverse channel, the ticket's ParkUntil or the agent giving
// up, then collects the attempt on the route's forward channel. Collected
// still pending, the agent is told to call again with the same requestId;
// a call again collects the same attempt at once and parks again. Nothing
// is begun or dispatched a second time, and the host's answer to a
// collect, never a push, is what counts.

// maxRememberedPushes bounds the verdict pushes kept for attempts no call
// holds: a push only wakes a call, and one that is dropped costs a call
// nothing but waiting to its ParkUntil, where it collects anyway.
const maxRememberedPushes = 1024

// approvals is the controller's side of the calls that wait for an
// approval: which attempts a call holds, and pushes no call was there for.
type approvals struct {
	// mu guards held, pushed and order, and closing stopping: a call holds
	// its attempt (held[id] is its wake channel, one slot) from before
	// its awaiting record is journaled or its call again collects, until
	// it is answered, so that a second call with the same requestId is
	// refused as in flight; pushed holds the verdict pushes that came for
	// an attempt no call held (order is their arrival, oldest first, at
	// most maxRememberedPushes), which a later hold takes at once. Only
	// map and slice work and a channel send that never blocks happen
	// under it.
	mu       sync.Mutex
	held     map[string]chan struct{}
	pushed   map[string]bool
	order    []string
	stopping chan struct{} // closed at shutdown: every parked call stops waiting
	stopped  bool
}

func newApprovals() *approvals {
	return &approvals{held: map[string]chan struct{}{}, pushed: map[string]bool{}, stopping: make(chan struct{})}
}

// hold takes attempt id for one call, with its wake channel (already
// woken when a push for it was remembered); false when another call holds
// it.
func (a *approvals) hold(id string) (<-chan struct{}, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[id] != nil {
		return nil, false
	}
	wake := make(chan struct{}, 1)
	if a.pushed[id] {
		delete(a.pushed, id)
		wake <- struct{}{}
	}
	a.held[id] = wake
	return wake, true
}

// release ends a call's hold of attempt id.
func (a *approvals) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.held, id)
}

// push wakes the call holding the pushed attempt, or remembers the push
// for the next call that holds it (forgetting the oldest past the bound).
func (a *approvals) push(v msg.VerdictPush) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if wake := a.held[v.Attempt]; wake != nil {
		select {
		case wake <- struct{}{}:
		default: // already woken
		}
		return
	}
	if a.pushed[v.Attempt] {
		return
	}
	for len(a.order) >= maxRememberedPushes {
		delete(a.pushed, a.order[0])
		a.order = a.order[1:]
	}
	// order may name attempts a hold has taken since: dropping one of
	// those forgets nothing.
	a.order = append(a.order, v.Attempt)
	a.pushed[v.Attempt] = true
}

// stop ends every park at shutdown: a parked call collects once and is
// answered, so that the dispatches in flight end before the journal closes.
func (a *approvals) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.stopped {
		a.stopped = true
		close(a.stopping)
	}
}

// awaitApproval goes on with a call whose dispatch the host answered
// awaiting approval with ticket t: it journals the awaiting record, parks
// and collects once.
func (c *Controller) awaitApproval(ctx context.Context, p *plan, id string, t *msg.AskTicket) *ToolResult {
	// Held before the record makes the attempt awaiting in the ledger: a
	// call again can only find it held.
	wake, _ := c.asks.hold(id)
	defer c.asks.release(id)
	rec := ledger.Awaiting{Attempt: id, Ask: t.ID, ExpiresAt: t.ExpiresAt}
	if _, err := c.j.Append(ledger.KindAwaiting, rec); err != nil {
		// Nothing was reserved or sent; but without the record a restart
		// could not tell that, so the attempt is uncertain as any begin
		// without a result.
		c.led.Unfinished(id, "the awaiting record of its ask could not be journaled")
		c.log.Error("journal awaiting failed; the attempt is uncertain", "attempt", id, "ask", t.ID, "err", err)
		return &ToolResult{Outcome: msg.StateUncertain, AttemptID: id,
			Detail: "the controller journal refused the record of the call's ask " + t.ID + "; the attempt is uncertain until inspected"}
	}
	c.led.Awaited(rec)
	c.log.Info("call awaits approval", "attempt", id, "ask", t.ID, "agent", p.principal, "application", p.application, "operation", p.operation)
	p.ask = t.ID
	return c.parkAndCollect(ctx, p, id, t, wake)
}

// resume answers a call again, with the same requestId and arguments, of
// an attempt awaiting approval: it collects at once, and parks again when
// the ask is still pending. Nothing is begun or dispatched again.
func (c *Controller) resume(ctx context.Context, p *plan, prior ledger.Prior) *ToolResult {
	id := prior.Attempt
	wake, ok := c.asks.hold(id)
	if !ok {
		return refused(msg.CodeUncertain, fmt.Sprintf("requestId %q is in flight as attempt %s, waiting for the approval of ask %s", p.requestID, id, prior.Ask), "")
	}
	defer c.asks.release(id)
	if a, _, open := c.led.Open(id); !open || a.State != msg.StateAwaitingApproval {
		// Another call collected it between the lookup and the hold.
		return refused(msg.CodeUncertain, fmt.Sprintf("requestId %q is in flight as attempt %s", p.requestID, id), "")
	}
	if p.offline {
		return refused(msg.CodeUnavailable, fmt.Sprintf("the host cannot be reached to collect the verdict of ask %s; attempt %s still awaits approval: call oracle_call again with the same requestId and arguments", prior.Ask, id), id)
	}
	p.ask = prior.Ask
	col := c.collect(ctx, p, id)
	if col.ticket == nil {
		return c.collected(p, id, col)
	}
	return c.parkAndCollect(ctx, p, id, col.ticket, wake)
}

// parkAndCollect parks the call on ticket t, then collects the attempt
// once: an end is answered as a dispatch's, still pending is the pending
// result. A call whose agent stopped waiting collects nothing.
func (c *Controller) parkAndCollect(ctx context.Context, p *plan, id string, t *msg.AskTicket, wake <-chan struct{}) *ToolResult {
	if !c.park(ctx, t, wake) {
		return pendingResult(id, t)
	}
	col := c.collect(ctx, p, id)
	if col.ticket != nil {
		return pendingResult(id, col.ticket)
	}
	return c.collected(p, id, col)
}

// park waits for a verdict push (wake), the ticket's ParkUntil (the
// host's clock, read against the controller's; never past
// msg.MaxApprovalPark), or shutdown. It returns false when the agent's
// context ended first.
func (c *Controller) park(ctx context.Context, t *msg.AskTicket, wake <-chan struct{}) bool {
	d := min(time.UnixMilli(t.ParkUntil).Sub(c.now()), msg.MaxApprovalPark)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-wake:
	case <-timer.C:
	case <-c.asks.stopping:
	case <-ctx.Done():
		return false
	}
	return true
}

// collection is what a collect came back with: the ask still pending
// (ticket), an end to journal (res), or nothing learned (answer: the
// attempt still awaits approval, and the agent is told why).
type collection struct {
	res    ledger.Result
	ticket *msg.AskTicket
	answer *ToolResult
}

// collect asks the host, on the route's forward channel, what became of
// attempt id's ask, with a deadline of the call's timeout from now: the
// dispatch's deadline counts from the approval, or from the call again.
func (c *Controller) collect(ctx context.Context, p *plan, id string) collection {
	now := c.now()
	deadline := now.Add(p.timeout).UnixMilli()
	res, t, sent := c.exchange(ctx, p, id, deadline, msg.TypeCollect, msg.Collect{Attempt: id, Deadline: deadline})
	if !sent {
		// Nothing left: the attempt still awaits approval.
		return collection{answer: refused(msg.CodeUnavailable, fmt.Sprintf("the host cannot be reached to collect the verdict of ask %s; attempt %s still awaits approval: call oracle_call again with the same requestId and arguments", p.ask, id), id)}
	}
	failpoint.Hit(FailAfterCollectAnswer)
	if t == nil && res.Outcome == msg.StateRefused && res.Receipt == nil {
		return collection{answer: c.receiptlessCollect(p, id, res.Refusal)}
	}
	return collection{res: res, ticket: t}
}

// collected answers a collection that did not find the ask pending.
func (c *Controller) collected(p *plan, id string, col collection) *ToolResult {
	if col.answer != nil {
		return col.answer
	}
	return c.finish(p, id, col.res)
}

// pendingResult tells the agent that its call waits for approval, and how
// to collect the verdict. It is not an error.
func pendingResult(id string, t *msg.AskTicket) *ToolResult {
	exp := time.UnixMilli(t.ExpiresAt).UTC().Format(time.RFC3339)
	return &ToolResult{Outcome: msg.StateAwaitingApproval, AttemptID: id,
		Ask: &AskInfo{ID: t.ID, ExpiresAt: exp, OnTimeout: string(t.OnTimeout)},
		Detail: fmt.Sprintf("the call waits for approval (ask %s): call oracle_call again with the same requestId and arguments to collect the verdict; unanswered, the ask expires at %s to %s",
			t.ID, exp, verdictWords(t.OnTimeout))}
}

// verdictWords says what an on-timeout verdict does to the call.
func verdictWords(v msg.Verdict) string {
	switch v {
	case msg.VerdictApprove:
		return "approve (the call then goes on)"
	default:
		return "deny (the call is then refused, nothing charged)"
	}
}

// checkTicket checks the ask of a dispatch result awaiting approval.
func checkTicket(t *msg.AskTicket) error {
	switch {
	case t == nil:
		return fmt.Errorf("the host answered awaiting approval without an ask")
	case t.ID == "" || len(t.ID) > 64:
		return fmt.Errorf("the host answered awaiting approval with an ask id of %d bytes", len(t.ID))
	case t.OnTimeout != msg.VerdictApprove && t.OnTimeout != msg.VerdictDeny:
		return fmt.Errorf("the host answered awaiting approval with an on-timeout verdict %q", t.OnTimeout)
	}
	return nil
}
