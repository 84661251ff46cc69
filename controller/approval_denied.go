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
