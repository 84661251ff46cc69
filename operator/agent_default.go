package operator

import (
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Every dispatch names its principal, and a principal without a limits
// record of its own meets its controller's default record (agent "*",
// msg.DefaultAgent), so a name never set is not unlimited by accident;
// counts stay per principal. A store without a default (any store before
// it) limits such a principal by its grants and the payer alone, as
// before, so legacy uid:N configs keep working (DESIGN.md section 5).

// limitsOf is the record in force for agent of controller ctrl: its own,
// else the default, else nil; none for "" (an old reservation redelivered).
func (st *state) limitsOf(ctrl, agent string) *agentLimits {
	if agent == "" {
		return nil
	}
	if al := st.Agents[agentKey{ctrl, agent}]; al != nil {
		return al
	}
	return st.Agents[agentKey{ctrl, msg.DefaultAgent}]
}

// noAgentReason is the refusal of a dispatch that names no principal.
const noAgentReason = "the dispatch names no agent: every call must name its principal (an agent's name, uid:N or foreground), so the operator's limits apply to it; nothing was reserved or sent"

// refuseNoAgent refuses dispatch c naming no principal, before anything is
// admitted or journaled: it would pass every agent limit and mark.
func (s *Store) refuseNoAgent(ctrl string, c *hostlog.CheckedDispatch) *msg.Refusal {
	if c.Agent != "" {
		return nil
	}
	s.logRefusal(c, "the dispatch names no agent", "controller", ctrl)
	return &msg.Refusal{Code: msg.CodeBadRequest, Reason: noAgentReason}
}

// warnNoRecord logs once per principal one admitted under no record.
func (s *Store) warnNoRecord(ctrl, agent string) {
	s.warnOnce("no-limits/"+ctrl+"/"+agent, "steward-operator: agent has no limits record and its controller no default one (agent set '*'): only its grants and the payer limit it",
		"controller", ctrl, "agent", agent)
}

// defaultShow is agent under the default record al: its limits, the
// agent's own counts of today.
func (s *Store) defaultShow(al *agentLimits, agent string) views.AgentView {
	v := s.agentView(al)
	n := s.st.countsOn(agentKey{al.Limits.Controller, agent}, utcDay(s.clockLocked()), "", false, 0)
	v.Agent, v.Record = agent, msg.DefaultAgent
	v.CallsToday, v.CreditsToday, v.ConversationsToday = n.calls, n.credits, n.convs
	return v
}
