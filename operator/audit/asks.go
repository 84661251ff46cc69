package audit

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// `receipts verify` on approvals (DESIGN.md section 5, "Approvals"): every
// reservation of an invocation that the agent's limits record in force at
// that point of the journal marks for approval must have an ask for its
// attempt whose approve verdict (an answer, or an expiry to approve) was
// recorded before the reservation; a reservation without one is a
// finding. A receipt of an attempt with an ask must name that ask and who
// decided it, and a receipt of an attempt without one names none; a
// receipt that does not is a finding too. The ask records themselves must
// hang together (one ask an id and an attempt, each decided once): a break
// there is a fault, as replay would refuse it.

// askAudit is the audit's evidence about agents' limits and asks: the
// limits in force (and their signed records, which a point carries), and
// the asks not done. An ask is done once it is decided and its attempt
// ended: no later record can name it but as a fault, which this run still
// sees (doneIDs, doneAttempts) and a run from a point after it does not.
type askAudit struct {
	limits       map[agentKey]msg.AgentLimits // the record in force, so far in the journal
	signed       map[agentKey][]byte          // its signed record
	byID         map[string]*auditAsk
	byAttempt    map[string]*auditAsk
	doneIDs      map[string]bool
	doneAttempts map[string]bool
}

// auditAsk is one ask and its decision so far in the journal.
type auditAsk struct {
	id, attempt string
	seq         uint64 // its ask record
	decided     bool
	verdict     msg.Verdict
	answeredBy  string // "uid:N", "agent:NAME" or "expiry"
	ended       bool   // its attempt ended
}

// agentKey names one agent of one controller.
type agentKey struct{ controller, agent string }

func newAskAudit() *askAudit {
	return &askAudit{limits: map[agentKey]msg.AgentLimits{}, signed: map[agentKey][]byte{}, byID: map[string]*auditAsk{},
		byAttempt: map[string]*auditAsk{}, doneIDs: map[string]bool{}, doneAttempts: map[string]bool{}}
}

// ended is the end of attempt: its ask, if decided, is done.
func (k *askAudit) ended(attempt string) {
	if a := k.byAttempt[attempt]; a != nil {
		a.ended = true
		k.doneIf(a)
	}
}

// doneIf drops an ask decided whose attempt ended.
func (k *askAudit) doneIf(a *auditAsk) {
	if a.decided && a.ended {
		delete(k.byID, a.id)
		delete(k.byAttempt, a.attempt)
		k.doneIDs[a.id], k.doneAttempts[a.attempt] = true, true
	}
}

// agentLimits keeps an agent's limits record as the one in force from here on.
func (a *journalAudit) AgentLimits(r journal.Record, b *hostlog.AgentLimits) error {
	l, err := msg.VerifyAgentLimits(b.Limits, a.pub)
	if err != nil {
		return faultf("%s: agent limits: %v", recordWhere(r), err)
	}
	a.asks.limits[agentKey{l.Controller, l.Agent}] = l
	a.asks.signed[agentKey{l.Controller, l.Agent}] = b.Limits
	return nil
}

// ask keeps a raised ask.
func (a *journalAudit) Ask(r journal.Record, b *hostlog.Ask) error {
	if a.asks.byID[b.Ask] != nil || a.asks.doneIDs[b.Ask] {
		return faultf("%s: ask %s raised twice", recordWhere(r), b.Ask)
	}
	if a.asks.byAttempt[b.Attempt] != nil || a.asks.doneAttempts[b.Attempt] {
		return faultf("%s: attempt %s has a second ask %s", recordWhere(r), b.Attempt, b.Ask)
	}
	k := &auditAsk{id: b.Ask, attempt: b.Attempt, seq: r.Seq}
	a.asks.byID[b.Ask], a.asks.byAttempt[b.Attempt] = k, k
	return nil
}

// askAnswer keeps an ask's answer.
func (a *journalAudit) AskAnswer(r journal.Record, b *hostlog.AskAnswer) error {
	return a.decideAsk(r, b.Ask, b.Verdict, b.By)
}

// askExpired keeps an ask's expiry to its on-timeout verdict.
func (a *journalAudit) AskExpired(r journal.Record, b *hostlog.AskExpired) error {
	return a.decideAsk(r, b.Ask, b.Verdict, hostlog.AnsweredByExpiry)
}

func (a *journalAudit) decideAsk(r journal.Record, id string, v msg.Verdict, by string) error {
	k := a.asks.byID[id]
	switch {
	case k == nil && a.asks.doneIDs[id]:
		return faultf("%s: decides ask %s a second time", recordWhere(r), id)
	case k == nil:
		return faultf("%s: decides ask %s, which was never raised", recordWhere(r), id)
	case k.decided:
		return faultf("%s: decides ask %s a second time", recordWhere(r), id)
	case v != msg.VerdictApprove && v != msg.VerdictDeny:
		return faultf("%s: decides ask %s with verdict %q", recordWhere(r), id, v)
	}
	k.decided, k.verdict, k.answeredBy = true, v, by
	a.asks.doneIf(k)
	return nil
}

// checkApproval is the finding of a reservation of a marked invocation
// with no approved ask before it.
func (a *journalAudit) checkApproval(r journal.Record, b *hostlog.ReserveV2) {
	if b.Kind != msg.KindInvoke || b.Agent == "" {
		return
	}
	l, ok := a.asks.limits[agentKey{b.Controller, b.Agent}]
	if !ok {
		// No record of its own: the controller's default marks it.
		l, ok = a.asks.limits[agentKey{b.Controller, msg.DefaultAgent}]
	}
	if !ok || !l.Approval.Marks(b.Application, b.Operation) {
		return
	}
	k := a.asks.byAttempt[b.Attempt]
	var why string
	switch {
	case k == nil:
		why = "it has no ask"
	case !k.decided:
		why = fmt.Sprintf("its ask %s was not decided", k.id)
	case k.verdict != msg.VerdictApprove:
		why = fmt.Sprintf("its ask %s was denied by %s", k.id, k.answeredBy)
	default:
		return
	}
	a.findings = append(a.findings, fmt.Sprintf("reservation of attempt %s (%s): %s/%s is marked for approval by agent %s's limits (revision %d), and %s",
		b.Attempt, recordWhere(r), b.Application, b.Operation, b.Agent, l.Revision, why))
}

// checkReceiptAsk is the finding of a receipt that does not name its
// attempt's ask and who decided it, or names an ask its attempt has not.
func (a *journalAudit) checkReceiptAsk(rc msg.Receipt, where string) {
	k := a.asks.byAttempt[rc.Attempt]
	switch {
	case k == nil && (rc.Ask != "" || rc.AnsweredBy != ""):
		a.findings = append(a.findings, fmt.Sprintf("receipt %d (%s): names ask %q answered by %q, but attempt %s has no ask", rc.Seq, where, rc.Ask, rc.AnsweredBy, rc.Attempt))
	case k == nil:
	case rc.Ask != k.id || rc.AnsweredBy != k.answeredBy:
		a.findings = append(a.findings, fmt.Sprintf("receipt %d (%s): names ask %q answered by %q; attempt %s's ask is %s, answered by %q",
			rc.Seq, where, rc.Ask, rc.AnsweredBy, rc.Attempt, k.id, k.answeredBy))
	}
}
