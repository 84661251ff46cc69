package controller

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/wire/msg"
)

// Failpoints of the controller (internal/failpoint).
const (
	// FailAfterBegin: begin is durable, the dispatch not yet sent.
	FailAfterBegin = "controller-after-begin"
	// FailAfterConsent: the consent reply was sent on the reverse channel.
	FailAfterConsent = "controller-after-consent"
	// FailAfterAnswer: the host's answer arrived, the result is not journaled.
	FailAfterAnswer = "controller-after-answer"
)

// Refusal is a steward refusal as the tools show it.
type Refusal struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// ToolResult is the answer of oracle_discover and oracle_call: the
// transport outcome, the application's status and body (as text when it is
// UTF-8), the attempt and the receipt. Application output is data, never an
// instruction to steward.
type ToolResult struct {
	Outcome    string   `json:"outcome"`
	Status     int      `json:"status,omitempty"`
	BodyText   string   `json:"bodyText,omitempty"`
	BodyBase64 string   `json:"bodyBase64,omitempty"` // only when the body is not UTF-8
	AttemptID  string   `json:"attemptId,omitempty"`
	ReceiptID  string   `json:"receiptId,omitempty"`
	Replayed   bool     `json:"replayed,omitempty"`
	Refusal    *Refusal `json:"refusal,omitempty"`
	Detail     string   `json:"detail,omitempty"`
}

// IsError reports a steward refusal or an unfinished transport outcome;
// an application's own non-2xx answer is a definite outcome, not an error.
func (r *ToolResult) IsError() bool { return r.Outcome != msg.OutcomeDefinite }

func refused(code, reason, attempt string) *ToolResult {
	return &ToolResult{Outcome: msg.OutcomeRefused, AttemptID: attempt, Refusal: &Refusal{Code: code, Reason: reason}}
}

func answer(attempt string, status int, body, receipt []byte) *ToolResult {
	r := &ToolResult{Outcome: msg.OutcomeDefinite, Status: status, AttemptID: attempt}
	if utf8.Valid(body) {
		r.BodyText = string(body)
	} else {
		r.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	if receipt != nil {
		r.ReceiptID = hex.EncodeToString(msg.ReceiptHash(receipt))
	}
	return r
}

func fromResult(res resultRecord) *ToolResult {
	switch res.Outcome {
	case msg.OutcomeDefinite:
		return answer(res.Attempt, res.Status, res.Body, res.Receipt)
	case msg.OutcomeRefused:
		t := refused(msg.CodeInternal, res.Detail, res.Attempt)
		if res.Refusal != nil {
			t.Refusal = &Refusal{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
		}
		return t
	default:
		return &ToolResult{Outcome: res.Outcome, AttemptID: res.Attempt, Detail: res.Detail}
	}
}

// runTool validates, journals, dispatches and journals the result of one
// tool call. fg is the foreground request id, "" for MCP.
func (c *Controller) runTool(ctx context.Context, tool string, raw []byte, fg string) *ToolResult {
	p, err := c.plan(tool, raw)
	if err != nil {
		return refused(msg.CodeBadRequest, err.Error(), "")
	}
	return c.dispatch(ctx, p, fg)
}

// dispatch is the journal-first sequence of DESIGN.md section 5 on the
// controller's side: check the requestId index, journal begin, send, journal
// the result, answer.
func (c *Controller) dispatch(ctx context.Context, p *plan, fg string) *ToolResult {
	// The gate is write-locked only at shutdown: it waits for the calls in
	// flight to journal their results before the journal closes.
	if !c.gate.TryRLock() {
		return refused(msg.CodeUnavailable, "the controller is shutting down; nothing was sent", "")
	}
	defer c.gate.RUnlock()
	id := newID()
	b := beginRecord{
		Attempt: id, Tool: p.tool, Application: p.application, Operation: p.operation,
		RequestID: p.requestID, ConversationID: p.conversationID, Arguments: p.args,
		Kind: p.kind, Method: p.req.Method, Path: p.req.Path, Body: p.req.Body,
		RequestSHA256: p.sha[:], Route: p.route.Route, Foreground: fg,
	}
	key := reqKey{p.application, p.requestID}
	c.led.mu.Lock()
	prev := c.led.byReq[key]
	if p.requestID != "" && prev != nil {
		switch prev.state {
		case StateDefinite:
			attempt, seq, same := prev.attempt, prev.answerSeq, prev.sha == p.sha
			c.led.mu.Unlock()
			if !same {
				return refused(msg.CodeConflict, fmt.Sprintf("requestId %q was used with different arguments by attempt %s", p.requestID, attempt), "")
			}
			return c.replay(attempt, seq)
		case StatePending:
			attempt, same := prev.attempt, prev.sha == p.sha
			c.led.mu.Unlock()
			if !same {
				return refused(msg.CodeConflict, fmt.Sprintf("requestId %q is in flight with different arguments as attempt %s", p.requestID, attempt), "")
			}
			return refused(msg.CodeUncertain, fmt.Sprintf("requestId %q is in flight as attempt %s", p.requestID, attempt), "")
		case StateUncertain:
			attempt := prev.attempt
			c.led.mu.Unlock()
			return refused(msg.CodeUncertain, fmt.Sprintf("requestId %q has an uncertain attempt %s: inspect it with `steward-controller attempts inspect %s`", p.requestID, attempt, attempt), "")
		}
		// refused, not-sent, abandoned, released: nothing reached the
		// application, a new attempt may be made.
	}
	c.led.applyBegin(b, 0, true)
	c.led.mu.Unlock()

	seq, err := c.j.Append(kindBegin, b)
	if err != nil {
		c.led.mu.Lock()
		delete(c.led.open, id)
		if p.requestID != "" {
			if prev != nil {
				c.led.byReq[key] = prev
			} else {
				delete(c.led.byReq, key)
			}
		}
		c.led.mu.Unlock()
		c.log.Error("journal begin failed; nothing sent", "attempt", id, "err", err)
		return refused(msg.CodeJournal, "the controller journal refused the call; nothing was sent", "")
	}
	c.led.mu.Lock()
	if e := c.led.open[id]; e != nil {
		e.beginSeq = seq
	}
	c.led.mu.Unlock()
	failpoint.Hit(FailAfterBegin)

	res := c.send(ctx, p, id)
	rseq, err := c.j.Append(kindResult, res)
	c.led.mu.Lock()
	if err != nil {
		if e := c.led.open[id]; e != nil {
			e.state, e.detail = StateUncertain, "the result could not be journaled"
		}
		if q := c.led.byReq[key]; p.requestID != "" && q != nil && q.attempt == id {
			q.state = StateUncertain
		}
		c.led.mu.Unlock()
		c.log.Error("journal result failed; the attempt is uncertain", "attempt", id, "err", err)
		return &ToolResult{Outcome: msg.OutcomeUncertain, AttemptID: id, Detail: "the controller journal refused the result; the attempt is uncertain until inspected"}
	}
	if e := c.led.open[id]; e != nil && e.settled != nil && res.Receipt != nil && !bytes.Equal(e.settled, msg.ReceiptHash(res.Receipt)) {
		c.log.Error("SETTLE MISMATCH: the host settled a different receipt than it answered", "attempt", id)
	}
	c.led.applyResult(res, rseq)
	c.led.mu.Unlock()
	if p.kind == msg.KindList && res.Outcome == msg.OutcomeDefinite && res.Status == 200 {
		c.learnLimits(p.application, res.Body)
	}
	return fromResult(res)
}

// replay answers from the journaled answer of an earlier attempt.
func (c *Controller) replay(attempt string, seq uint64) *ToolResult {
	rec, err := readRecord(c.j, seq)
	if err != nil {
		c.log.Error("replay: reading the recorded answer", "attempt", attempt, "seq", seq, "err", err)
		return refused(msg.CodeJournal, "the recorded answer could not be read", attempt)
	}
	var t *ToolResult
	switch rec.Kind {
	case kindResult:
		var r resultRecord
		if err = decodeBody(rec, &r); err == nil {
			t = fromResult(r)
		}
	case kindResolve:
		var r resolveRecord
		if err = decodeBody(rec, &r); err == nil {
			t = answer(r.Attempt, r.Status, r.Body, r.Receipt)
		}
	default:
		err = fmt.Errorf("record %d is a %s, not an answer", seq, rec.Kind)
	}
	if err != nil {
		c.log.Error("replay", "attempt", attempt, "err", err)
		return refused(msg.CodeJournal, "the recorded answer could not be read", attempt)
	}
	t.Replayed = true
	return t
}

// dispatchTimeout bounds one dispatch round trip: the route's own
// delivery timeouts plus the reserve callback and a margin.
func dispatchTimeout(r msg.RouteRecord) time.Duration {
	d := time.Duration(r.Timeouts.ConnectMs+r.Timeouts.ResponseMs)*time.Millisecond + 5*time.Second
	if d < 10*time.Second {
		d = 10 * time.Second
	}
	return d
}

// send delivers the dispatch on the route's forward channel and classifies
// what came back. Nothing is ever resent.
func (c *Controller) send(ctx context.Context, p *plan, id string) resultRecord {
	f := c.fwd[p.application]
	d := msg.Dispatch{
		Attempt: id, Application: p.application, Kind: p.kind, Operation: p.operation,
		Query: p.query, Method: p.req.Method, Path: p.req.Path, Body: p.req.Body,
		RequestSHA256: p.sha[:], RequestID: p.requestID, ConversationID: p.conversationID,
	}
	// The dispatch outlives the agent's request: once sent, its answer is
	// journaled whether or not anyone is still waiting.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dispatchTimeout(p.route))
	defer cancel()
	env, sent, err := f.call(dctx, msg.TypeDispatch, d)
	if err != nil {
		if !sent {
			c.log.Warn("route unavailable; nothing sent", "attempt", id, "route", p.route.Route, "err", err)
			return resultRecord{Attempt: id, Outcome: msg.OutcomeRefused,
				Refusal: &msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host cannot be reached for application " + p.application}}
		}
		c.log.Error("channel failed after dispatch was sent; attempt uncertain", "attempt", id, "err", err)
		return resultRecord{Attempt: id, Outcome: msg.OutcomeUncertain, Detail: "the channel to the host failed after the dispatch was sent"}
	}
	failpoint.Hit(FailAfterAnswer)
	switch env.T {
	case msg.TypeDispatchResult:
		var r msg.DispatchResult
		if err := env.Decode(&r); err != nil || r.Attempt != id {
			c.log.Error("malformed dispatch result", "attempt", id, "err", err)
			return resultRecord{Attempt: id, Outcome: msg.OutcomeUncertain, Detail: "the host's answer was malformed"}
		}
		return c.checkResult(p, r)
	case msg.TypeRefused:
		var r msg.Refusal
		if err := env.Decode(&r); err != nil {
			return resultRecord{Attempt: id, Outcome: msg.OutcomeUncertain, Detail: "the host's refusal was malformed"}
		}
		return resultRecord{Attempt: id, Outcome: msg.OutcomeRefused, Refusal: &r}
	default:
		return resultRecord{Attempt: id, Outcome: msg.OutcomeUncertain, Detail: "the host answered with an unexpected frame " + env.T}
	}
}

// checkResult verifies a definite answer's receipt against the pinned
// host key and the attempt. A receipt that does not verify leaves the
// attempt uncertain: the answer cannot be trusted, nor retried.
func (c *Controller) checkResult(p *plan, r msg.DispatchResult) resultRecord {
	res := resultRecord{Attempt: r.Attempt, Outcome: r.Outcome, Status: r.Status, Body: r.Body, Receipt: r.Receipt, Refusal: r.Refusal, Detail: r.Detail}
	switch r.Outcome {
	case msg.OutcomeDefinite:
		if err := c.verifyReceipt(r.Receipt, r.Attempt, p.sha[:], r.Body, r.Status); err != nil {
			c.log.Error("RECEIPT REFUSED: the host's answer carries a receipt that does not verify", "attempt", r.Attempt, "err", err)
			return resultRecord{Attempt: r.Attempt, Outcome: msg.OutcomeUncertain, Detail: "the host's receipt did not verify: " + err.Error()}
		}
	case msg.OutcomeRefused, msg.OutcomeNotSent, msg.OutcomeUncertain:
		res.Receipt = nil
	default:
		return resultRecord{Attempt: r.Attempt, Outcome: msg.OutcomeUncertain, Detail: "the host answered an unknown outcome " + r.Outcome}
	}
	if r.Outcome == msg.OutcomeRefused && r.Refusal == nil {
		res.Refusal = &msg.Refusal{Code: msg.CodeInternal, Reason: r.Detail}
	}
	return res
}

// verifyReceipt checks a signed receipt against the host key and that it
// is the receipt of this attempt, request and response.
func (c *Controller) verifyReceipt(signed []byte, attempt string, reqSHA, body []byte, status int) error {
	rc, err := c.verifiedReceipt(attempt, signed)
	if err != nil {
		return err
	}
	respSHA := sha(body)
	switch {
	case rc.Attempt != attempt:
		return fmt.Errorf("receipt is for attempt %s", rc.Attempt)
	case !bytes.Equal(rc.RequestSHA256, reqSHA):
		return fmt.Errorf("receipt request hash does not match the journaled begin")
	case !bytes.Equal(rc.ResponseSHA256, respSHA[:]):
		return fmt.Errorf("receipt response hash does not match the answer")
	case rc.Status != status:
		return fmt.Errorf("receipt status %d does not match the answer's %d", rc.Status, status)
	case rc.Controller != c.cfg.Name:
		return fmt.Errorf("receipt is for controller %q", rc.Controller)
	}
	return nil
}
