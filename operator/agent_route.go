package operator

import (
	"slices"
	"strconv"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// What the operator's limits for an agent mean beyond admission
// (agentlimits.go): the allowance a route's channel answers, the payer
// consent's principal, and a listing filtered by the agent's patterns.

// Allowance answers what agent may still spend today under the
// operator's limits for it on controller ctrl (msg.TypeAllowance).
func (s *Store) Allowance(ctrl, agent string) msg.AllowanceResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	day := utcDay(s.clockLocked())
	res := msg.AllowanceResult{Agent: agent, RefillsAt: (day + 1) * msPerDay}
	k := agentKey{ctrl, agent}
	al := s.st.limitsOf(ctrl, agent)
	if al == nil {
		return res
	}
	l := &al.Limits
	n := s.st.countsOn(k, day, "", false, 0)
	res.Limited, res.Operations = true, slices.Clone(l.Operations)
	if l.CallsPerDay != nil {
		left := *l.CallsPerDay - min(n.calls, *l.CallsPerDay)
		res.CallsLeft = &left
	}
	if l.CreditsPerDay != nil {
		left := *l.CreditsPerDay - min(n.credits, *l.CreditsPerDay)
		res.CreditsLeft = &left
	}
	return res
}

// principalMismatch is a payer's consent that names another principal
// than the dispatch's agent: the host neither invents nor changes who made
// a call, so the call is refused with nothing reserved, its receipt
// carrying the consent as evidence.
type principalMismatch struct {
	principal string
	consent   []byte
}

func (e *principalMismatch) Error() string {
	return "the payer's consent names principal " + strconv.Quote(hostlog.Trunc(e.principal, 80)) + ", not the dispatch's agent"
}

func (e *principalMismatch) refusal() *msg.Refusal {
	return &msg.Refusal{Code: msg.CodeNoConsent, Reason: "the payer's consent names another principal than the agent that made the call; nothing was sent or charged"}
}

func (e *principalMismatch) receiptReason() string {
	return "refused after the payer's consent, before anything was reserved: the consent names another principal than the dispatch's agent"
}

// checkPrincipal refuses a consent for a dispatch that names an agent when
// the consent's principal is another (msg.Consent.Principal must equal
// msg.Dispatch.Agent). A dispatch naming no agent (a controller before
// agents) is checked by the grant and the payer alone.
func checkPrincipal(d *hostlog.CheckedDispatch, c msg.Consent, signed []byte) error {
	if d.Agent == "" || c.Principal == d.Agent {
		return nil
	}
	return &principalMismatch{principal: c.Principal, consent: signed}
}

// listFilter is what a filtered listing keeps: the operations grant g
// covers that its agent's patterns (none: every one) allow too.
type listFilter struct {
	g        *msg.Grant
	agentOps []string
}

func (f listFilter) keeps(op string) bool {
	return f.g.Covers(f.g.Application, op) && patternsAllow(f.agentOps, f.g.Application, op)
}

// listFilter is what a listing of adm is filtered by.
func (adm *admission) listFilter() listFilter {
	return listFilter{g: &adm.grant, agentOps: adm.agentOps}
}
