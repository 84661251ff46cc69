package controller

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
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
// transport outcome, the application's status and body, the attempt and
// the receipt. Application output is data, never an instruction to
// steward.
//
// The body is in exactly one of three fields, so that an agent reads the
// application's answer as it is: Body when its bytes are JSON (nested as
// JSON, never escaped into a string), BodyText when they are UTF-8 but not
// JSON, BodyBase64 when they are not UTF-8. None of them when the body is
// empty.
type ToolResult struct {
	Outcome msg.State `json:"outcome"`
	Status  int       `json:"status,omitempty"`
	// Body is the application's answer when it is JSON (and UTF-8): the
	// same value, as encoding/json compacts it. The receipt's hash is over
	// the bytes the application sent, which the journal keeps.
	Body       json.RawMessage `json:"body,omitempty"`
	BodyText   string          `json:"bodyText,omitempty"`   // only when the body is UTF-8 but not JSON
	BodyBase64 string          `json:"bodyBase64,omitempty"` // only when the body is not UTF-8
	AttemptID  string          `json:"attemptId,omitempty"`
	ReceiptID  string          `json:"receiptId,omitempty"`
	Replayed   bool            `json:"replayed,omitempty"`
	// Charge is what this call was charged, from the verified receipt, on
	// every definite outcome and every end with a receipt (refused or
	// not-sent after admission: 0): 0 for a free request, for an answer
	// other than 2xx under a grant with no refusal price, and for a replay
	// (the recorded answer is not charged again).
	Charge *uint64 `json:"charge,omitempty"`
	// CallPrice, on a discovery's answer, is what an oracle_call of the
	// operations it shows costs, in credits, under the operator's grant;
	// the payer's own ceiling (steward_overview) applies as well.
	CallPrice *uint64  `json:"callPrice,omitempty"`
	Refusal   *Refusal `json:"refusal,omitempty"`
	Detail    string   `json:"detail,omitempty"`
	// Ask is the ask of a call to an operation marked for approval: on a
	// result awaiting approval with its expiry and on-timeout verdict, on
	// its end the one its verified receipt names; AnsweredBy is who
	// decided it, from that receipt ("uid:N", "agent:NAME", "expiry").
	Ask        *AskInfo `json:"ask,omitempty"`
	AnsweredBy string   `json:"answeredBy,omitempty"`

	// text, when set, is the result's text content in place of its JSON:
	// an answer that has a shorter reading of its own (a search across
	// applications lists its matches one line each) sets it.
	text string
}

// AskInfo names the ask a call waits or waited on.
type AskInfo struct {
	ID        string `json:"id"`
	ExpiresAt string `json:"expiresAt,omitempty"` // RFC 3339, UTC: when it expires unanswered
	OnTimeout string `json:"onTimeout,omitempty"` // approve or deny: what it expires to
}

// IsError reports every answer that is not the application's success: a
// steward refusal, an unfinished transport outcome, and an application's
// own answer whose status is not 2xx (its status and body are kept). An
// agent that looks only at isError must not take a 404 for a result. A
// call awaiting approval is not an error: it is pending, and a call again
// collects it.
func (r *ToolResult) IsError() bool {
	if r.Outcome == msg.StateAwaitingApproval {
		return false
	}
	return r.Outcome != msg.StateDefinite || r.Status < 200 || r.Status > 299
}

func refused(code, reason, attempt string) *ToolResult {
	return &ToolResult{Outcome: msg.StateRefused, AttemptID: attempt, Refusal: &Refusal{Code: code, Reason: reason}}
}

func answer(attempt string, status int, body, receipt []byte, charge uint64) *ToolResult {
	r := &ToolResult{Outcome: msg.StateDefinite, Status: status, AttemptID: attempt, Charge: &charge}
	r.setBody(body)
	if receipt != nil {
		r.ReceiptID = hex.EncodeToString(msg.ReceiptHash(receipt))
	}
	return r
}

// setBody puts the application's body in the one field that shows it as
// it is. UTF-8 is checked first: encoding/json's validity check lets
// invalid UTF-8 inside strings through, and such bytes would not survive a
// client's decoding.
func (r *ToolResult) setBody(body []byte) {
	switch {
	case len(body) == 0:
	case !utf8.Valid(body):
		r.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	case json.Valid(body):
		r.Body = json.RawMessage(body)
	default:
		r.BodyText = string(body)
	}
}

func fromResult(res ledger.Result) *ToolResult {
	t := fromOutcome(res)
	if res.Ask != "" {
		t.Ask, t.AnsweredBy = &AskInfo{ID: res.Ask}, res.AnsweredBy
	}
	return t
}

func fromOutcome(res ledger.Result) *ToolResult {
	switch res.Outcome {
	case msg.StateDefinite:
		t := answer(res.Attempt, res.Status, res.Body, res.Receipt, res.Charge)
		t.CallPrice = res.CallPrice
		return t
	case msg.StateRefused:
		t := refused(msg.CodeInternal, res.Detail, res.Attempt)
		if res.Refusal != nil {
			t.Refusal = &Refusal{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
		}
		return withReceipt(t, res)
	default:
		return withReceipt(&ToolResult{Outcome: res.Outcome, AttemptID: res.Attempt, Detail: res.Detail}, res)
	}
}

// withReceipt adds to t, an end without an answer, the receipt that
// records it and its charge (0), when the host signed one.
func withReceipt(t *ToolResult, res ledger.Result) *ToolResult {
	if res.Receipt != nil {
		t.ReceiptID = hex.EncodeToString(msg.ReceiptHash(res.Receipt))
		t.Charge = &res.Charge
	}
	return t
}

// runTool validates, journals, dispatches and journals the result of one
// tool call of agent (Config.AgentOf of the MCP peer).
func (c *Controller) runTool(ctx context.Context, tool string, raw []byte, agent string) *ToolResult {
	p, err := c.plan(ctx, tool, raw, agent)
	if err != nil {
		return planRefusal(err)
	}
	return c.dispatch(ctx, p, "")
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
	// The deadline counts from when the controller took the call: the
	// agent has been waiting since, begin's fsync included.
	now := c.now()
	deadline := now.Add(p.timeout).UnixMilli()
	b := p.begin(id)
	b.Foreground, b.Day, b.Deadline = fg, c.pay.today(now), deadline
	// Only this agent's earlier attempts are looked up (ledger.Begin keys
	// them by agent), and only those are inspected or resolved here.
	prior, ok := c.led.Begin(b)
	if !ok && prior.State == msg.StatePending && c.writes.wait(prior.Attempt) {
		// Its answer went out before its result record: read the ledger
		// again once the record is written (or refused).
		prior, ok = c.led.Begin(b)
	}
	if !ok && prior.State == msg.StateUncertain && c.learnResolution(ctx, prior.Attempt) {
		// The host knew what became of it: decide the call afresh.
		prior, ok = c.led.Begin(b)
	}
	if ok && p.offline {
		// The attempt that decided the call when it was planned no longer
		// does (it ended without an answer meanwhile): a new attempt needs
		// the route's live record.
		c.led.Abort(id)
		return refused(msg.CodeUnavailable, routesUnavailable, "")
	}
	if !ok && prior.Err != nil {
		c.log.Error("the requestId index could not be read; the call is refused", "requestId", p.requestID, "err", prior.Err)
		return refused(msg.CodeJournal, "the controller's requestId index could not be read; nothing was sent", "")
	}
	if !ok {
		if !prior.SameRequest {
			// Begun before the ids were scoped: compare with the call's
			// request built as it was then.
			prior.SameRequest = c.sameUnscopedConversation(p, prior.RequestSHA256, prior.Unscoped)
		}
		return c.decidedBy(ctx, p, prior)
	}
	seq, err := c.j.Append(ledger.KindBegin, b)
	if err != nil {
		return c.beginFailed(id, err)
	}
	c.led.Journaled(id, seq)
	failpoint.Hit(FailAfterBegin)

	res, ask := c.send(ctx, p, id, deadline)
	if ask != nil {
		return c.awaitApproval(ctx, p, id, ask)
	}
	return c.finish(p, id, res)
}

// finish journals the result of attempt id and answers it: a definite
// answer with a verified receipt at once, its record journaled beside it
// (resultwrite.go); any other end once its record is durable.
func (c *Controller) finish(p *plan, id string, res ledger.Result) *ToolResult {
	res.Consented = c.pay.consented(id)
	if p.kind == msg.KindList && res.Outcome == msg.StateDefinite && res.Status == 200 {
		c.learnLimits(p.application, res.Body)
	}
	if offPath(res) {
		c.writeAfterReply(id, res)
		return fromResult(res)
	}
	if !c.writeResult(id, res) {
		return &ToolResult{Outcome: msg.StateUncertain, AttemptID: id, Detail: "the controller journal refused the result; the attempt is uncertain until inspected"}
	}
	return fromResult(res)
}

// decidedBy answers a call that an earlier attempt with the same
// requestId decides: its recorded answer, a refusal naming it, or for an
// attempt awaiting approval its verdict collected (resume).
func (c *Controller) decidedBy(ctx context.Context, p *plan, prior ledger.Prior) *ToolResult {
	if prior.Denied {
		return c.deniedAgain(p, prior)
	}
	switch prior.State {
	case msg.StateAwaitingApproval:
		if !prior.SameRequest {
			return refused(msg.CodeConflict, fmt.Sprintf("requestId %q awaits approval (ask %s) with different arguments as attempt %s", p.requestID, prior.Ask, prior.Attempt), "")
		}
		return c.resume(ctx, p, prior)
	case msg.StateDefinite:
		if !prior.SameRequest {
			return refused(msg.CodeConflict, fmt.Sprintf("requestId %q was used with different arguments by attempt %s", p.requestID, prior.Attempt), "")
		}
		return c.replay(p.requestID, prior.Attempt, prior.Answer)
	case msg.StatePending:
		if !prior.SameRequest {
			return refused(msg.CodeConflict, fmt.Sprintf("requestId %q is in flight with different arguments as attempt %s", p.requestID, prior.Attempt), "")
		}
		return refused(msg.CodeUncertain, fmt.Sprintf("requestId %q is in flight as attempt %s", p.requestID, prior.Attempt), "")
	case msg.StateReleased, msg.StatePerformed:
		if !prior.SameRequest {
			return refused(msg.CodeConflict, fmt.Sprintf("requestId %q was used with different arguments by attempt %s", p.requestID, prior.Attempt), "")
		}
		return c.operatorResolution(p.requestID, prior.Attempt, prior.Answer)
	default:
		return refused(msg.CodeUncertain, fmt.Sprintf("requestId %q has an uncertain attempt %s: nothing is sent again until the operator resolves it on the host (steward-operator attempts resolve %s --redeliver|--release|--charge --reason TEXT); a new call needs a new requestId", p.requestID, prior.Attempt, prior.Attempt), "")
	}
}

// replay answers requestID from the journaled answer of an earlier
// attempt, read at its place at once however old it is (journal.ReadAt);
// an answer `history archive` moved out is refused, naming its archive.
func (c *Controller) replay(requestID, attempt string, at journal.Place) *ToolResult {
	rec, err := c.j.ReadAt(at)
	seq := at.Seq
	if t := archivedAnswer(err, requestID, attempt); t != nil {
		return t
	}
	if err != nil {
		c.log.Error("replay: reading the recorded answer", "attempt", attempt, "seq", seq, "err", err)
		return refused(msg.CodeJournal, "the recorded answer could not be read", attempt)
	}
	var t *ToolResult
	switch rec.Kind {
	case ledger.KindResult:
		var r ledger.Result
		if err = ledger.Decode(rec, &r); err == nil {
			t = fromResult(r)
		}
	case ledger.KindResolve:
		var r ledger.Resolve
		if err = ledger.Decode(rec, &r); err == nil {
			t = answer(r.Attempt, r.Status, r.Body, r.Receipt, r.Charge)
		}
	case ledger.KindResolveV2:
		var r ledger.ResolveV2
		if err = ledger.Decode(rec, &r); err == nil {
			t = answer(r.Attempt, r.Status, r.Body, r.Receipt, r.Charge)
		}
	default:
		err = fmt.Errorf("record %d is a %s, not an answer", seq, rec.Kind)
	}
	if err != nil {
		c.log.Error("replay", "attempt", attempt, "err", err)
		return refused(msg.CodeJournal, "the recorded answer could not be read", attempt)
	}
	t.Replayed = true
	if t.Charge != nil {
		t.Charge = new(uint64)
	}
	return t
}

// waitUntil is when the controller stops waiting for the host's answer
// to a dispatch with deadline (unix ms, its own clock now): the deadline
// plus twice msg.DeadlineTolerance, since the host stops delivering at the
// deadline plus the tolerance by its own clock, which may be up to the
// tolerance behind this one, and its answer must still arrive. Measured on
// this process's monotonic clock from now.
func waitUntil(deadline int64, now time.Time) time.Time {
	return time.Now().Add(time.UnixMilli(deadline).Sub(now) + 2*msg.DeadlineTolerance)
}

// send delivers the dispatch on the route's forward channel and classifies
// what came back. Nothing is ever resent. The dispatch carries deadline;
// past it (waitUntil) the controller stops waiting, and the attempt is
// uncertain: the host may still have delivered it. An answer awaiting
// approval comes back as its ask.
func (c *Controller) send(ctx context.Context, p *plan, id string, deadline int64) (ledger.Result, *msg.AskTicket) {
	d := msg.Dispatch{Attempt: id, Method: p.req.Method, Path: p.req.Path, Body: p.req.Body, Deadline: deadline, Agent: p.principal,
		AgentUID: peerUIDOf(ctx), Justification: p.justification}
	if p.kind == msg.KindInvoke {
		d.ConversationName = p.conversationID // the host shows it; the body carries it scoped
	}
	res, ask, sent := c.exchange(ctx, p, id, deadline, msg.TypeDispatch, d)
	if !sent {
		return ledger.Result{Attempt: id, Outcome: msg.StateRefused,
			Refusal: &msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host cannot be reached for application " + p.application}}, nil
	}
	return res, ask
}

// exchange sends one frame of attempt id (a dispatch, or a collect of an
// attempt awaiting approval) on p's route's forward channel and classifies
// the answer; sent is false when nothing left this process.
func (c *Controller) exchange(ctx context.Context, p *plan, id string, deadline int64, t string, body any) (res ledger.Result, ask *msg.AskTicket, sent bool) {
	f, release := c.useForward(p.route)
	defer release()
	defer c.flight.start(id, t)()
	// The exchange outlives the agent's request: once sent, its answer is
	// journaled whether or not anyone is still waiting.
	dctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), waitUntil(deadline, c.now()))
	defer cancel()
	env, sent, err := f.call(dctx, t, body)
	if err != nil {
		if !sent {
			c.log.Warn("route unavailable; nothing sent", "attempt", id, "route", p.route.Route, "frame", t, "err", err)
			return ledger.Result{}, nil, false
		}
		if dctx.Err() != nil {
			c.log.Error("no answer from the host by the call's deadline; attempt uncertain", "attempt", id,
				"deadline", time.UnixMilli(deadline).UTC().Format(time.RFC3339Nano), "err", err)
			return ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: "the call's deadline passed with no answer from the host; the attempt may still be in flight or delivered"}, nil, true
		}
		c.log.Error("channel failed after dispatch was sent; attempt uncertain", "attempt", id, "frame", t, "err", err)
		return ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: "the channel to the host failed after the " + t + " was sent"}, nil, true
	}
	failpoint.Hit(FailAfterAnswer)
	res, ask = c.classify(p, id, env)
	return res, ask, true
}

// classify reads the host's answer to a dispatch or a collect of attempt
// id: a dispatch result checked (checkResult), awaiting approval with its
// ask, a refusal, or else uncertain.
func (c *Controller) classify(p *plan, id string, env *wire.Envelope) (ledger.Result, *msg.AskTicket) {
	switch env.T {
	case msg.TypeDispatchResult:
		var r msg.DispatchResult
		if err := env.Decode(&r); err != nil || r.Attempt != id {
			c.log.Error("malformed dispatch result", "attempt", id, "err", err)
			return ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: "the host's answer was malformed"}, nil
		}
		if r.Outcome == msg.StateAwaitingApproval {
			if err := checkTicket(r.Ask); err != nil {
				c.log.Error("malformed answer awaiting approval; attempt uncertain", "attempt", id, "err", err)
				return ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: err.Error()}, nil
			}
			return ledger.Result{Attempt: id, Outcome: r.Outcome}, r.Ask
		}
		return c.checkResult(p, r), nil
	case msg.TypeRefused:
		var r msg.Refusal
		if err := env.Decode(&r); err != nil {
			return ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: "the host's refusal was malformed"}, nil
		}
		return ledger.Result{Attempt: id, Outcome: msg.StateRefused, Refusal: c.payerWord(id, &r)}, nil
	default:
		return ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: "the host answered with an unexpected frame " + env.T}, nil
	}
}

// payerWord is the refusal the agent is told: the payer's own, when the
// host refused for want of a consent the payer refused.
func (c *Controller) payerWord(id string, r *msg.Refusal) *msg.Refusal {
	if r.Code == msg.CodeNoConsent {
		if own := c.pay.refusalOf(id); own != nil {
			return own
		}
	}
	return r
}

// resultOf is the host's answer to a dispatch of kind as its result
// record has it, before checkResult adds what the receipt proves (the
// charge, the ask and who answered it): the one copy of the answer's
// fields into the record. The record does not embed the answer: that is
// the wire's message, shared with the host, and a field added to it would
// change the journal's bytes unseen (the two already differ on "ask": the
// host's ticket, the receipt's ask id). TestResultOfCarriesTheAnswer fails
// on such a field until this says what becomes of it. The ticket is not
// carried (an answer awaiting approval is journaled as an awaiting record),
// and the price of an invoke is a discovery's alone.
func resultOf(r msg.DispatchResult, kind string) ledger.Result {
	res := ledger.Result{Attempt: r.Attempt, Outcome: r.Outcome, Status: r.Status, Body: r.Body, Receipt: r.Receipt, Refusal: r.Refusal, Detail: r.Detail}
	if kind != msg.KindInvoke {
		res.CallPrice = r.CallPrice
	}
	return res
}

// checkResult verifies a definite answer's receipt against the pinned
// host key, the attempt and the payer's consent. A receipt that does not
// verify leaves the attempt uncertain: the answer cannot be trusted, nor
// retried.
func (c *Controller) checkResult(p *plan, r msg.DispatchResult) ledger.Result {
	res := resultOf(r, p.kind)
	switch r.Outcome {
	case msg.StateDefinite, msg.StateRefused, msg.StateNotSent:
		if r.Receipt == nil && r.Outcome != msg.StateDefinite {
			break // an end without a receipt: refused before admission, or by a host before version 2 receipts
		}
		rc, err := c.checkEndReceipt(p, r)
		if err != nil {
			c.log.Error("RECEIPT REFUSED: the host's answer carries a receipt that does not verify", "attempt", r.Attempt, "outcome", r.Outcome, "err", err)
			return ledger.Result{Attempt: r.Attempt, Outcome: msg.StateUncertain, Detail: "the host's receipt did not verify: " + err.Error()}
		}
		res.Charge, res.Ask, res.AnsweredBy = rc.Charge, rc.Ask, rc.AnsweredBy
	case msg.StateUncertain:
		res.Receipt = nil
	default:
		return ledger.Result{Attempt: r.Attempt, Outcome: msg.StateUncertain, Detail: "the host answered an unknown outcome " + string(r.Outcome)}
	}
	if r.Outcome == msg.StateRefused && r.Refusal == nil {
		res.Refusal = &msg.Refusal{Code: msg.CodeInternal, Reason: r.Detail}
	}
	if res.Refusal != nil {
		res.Refusal = c.payerWord(r.Attempt, res.Refusal)
	}
	return res
}
