package controller

import (
	"fmt"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire/msg"
)

// deniedAgain answers a call whose requestId's attempt was denied (its
// ask denied, or expired or lapsed to deny): the same refusal with the
// same receipt, read from its result record, whatever the arguments. A
// denial sticks: no new attempt begins and no new ask is raised, so a
// human's "no" is never asked again by calling again, and nothing is
// reserved, consented to or charged. The answer is marked replayed and
// charges 0, as the denial did.
func (c *Controller) deniedAgain(p *plan, prior ledger.Prior) *ToolResult {
	t := c.replay(p.requestID, prior.Attempt, prior.Answer)
	if t.Refusal == nil || t.Refusal.Code != msg.CodeDenied {
		return t // the record could not be read: replay's refusal says so
	}
	other := ""
	if !prior.SameRequest {
		other = " (with other arguments)"
	}
	t.Detail = fmt.Sprintf("requestId %q was denied as attempt %s%s; a denied requestId stays denied: a new call needs a new requestId", p.requestID, prior.Attempt, other)
	return t
}

// FailAfterCollectAnswer: the host's answer to a collect arrived, its
// result is not journaled (a denial the host recorded, unknown here).
const FailAfterCollectAnswer = "controller-after-collect-answer"

// receiptlessCollect answers a collect the host refused without a
// receipt: the host ended nothing (every end of an asked attempt carries
// its receipt), so nothing is journaled. A duplicate means the host
// holds the attempt ended or being delivered, which this controller does
// not know the answer of: the attempt is uncertain, and the next call
// with its requestId asks the host (inspect) what became of it. Any other
// refusal (the host could not read or journal, the deadline) leaves it
// awaiting approval, to be collected again.
func (c *Controller) receiptlessCollect(p *plan, id string, ref *msg.Refusal) *ToolResult {
	if ref == nil {
		ref = &msg.Refusal{Code: msg.CodeInternal, Reason: "the host refused the collect without a reason"}
	}
	if ref.Code == msg.CodeDuplicate {
		c.led.Unfinished(id, "the host holds it no longer awaiting approval: "+ref.Reason)
		c.log.Warn("a collect found the attempt ended or delivered on the host; it is uncertain until inspected", "attempt", id, "ask", p.ask, "reason", ref.Reason)
		return &ToolResult{Outcome: msg.StateUncertain, AttemptID: id,
			Detail: "the host holds attempt " + id + " as no longer awaiting approval; call oracle_call again with the same requestId to learn its end from the host"}
	}
	return refused(ref.Code, ref.Reason+"; attempt "+id+" still awaits approval: call oracle_call again with the same requestId and arguments", id)
}

// deniedAfterAll records what the host reports of uncertain attempt b
// when a denial ended it (InspectResult.Refusal, code denied): the host
// died after its refused record, or its answer was lost. It is journaled
// as the result the collect would have given (the denial, its verified
// receipt naming the attempt's ask), so that it decides the requestId as
// any denial does; done false for every other report.
func (c *Controller) deniedAfterAll(b ledger.Begin, ir msg.InspectResult) (bool, error) {
	ask := c.led.AskOf(b.Attempt)
	if ir.State != msg.StateRefused || ir.Refusal == nil || ir.Refusal.Code != msg.CodeDenied || ask == "" {
		return false, nil
	}
	receipt, err := c.checkInspectedEnd(b, ir)
	var rc msg.Receipt
	if err == nil {
		rc, err = c.verifyEndReceipt(receipt, b.Attempt, b.RequestSHA256)
	}
	if err == nil && receipt == nil {
		err = fmt.Errorf("the denial carries no receipt")
	}
	if err == nil {
		err = checkReceiptAsk(rc, ask)
	}
	if err != nil {
		return true, fmt.Errorf("%w: attempt %s: the host's receipt of its denial does not verify: %w", ErrNotResolvable, b.Attempt, err)
	}
	res := ledger.Result{Attempt: b.Attempt, Outcome: msg.StateRefused, Receipt: receipt, Refusal: ir.Refusal, Detail: ir.Detail,
		Charge: rc.Charge, Ask: rc.Ask, AnsweredBy: rc.AnsweredBy}
	place, err := c.j.AppendAt(ledger.KindResult, res)
	if err != nil {
		return true, fmt.Errorf("attempt %s: journaling its denial: %w", b.Attempt, err)
	}
	c.led.Finish(res, place)
	c.log.Info("an uncertain attempt was denied: the host recorded its denial", "attempt", b.Attempt, "ask", ask)
	return true, nil
}
