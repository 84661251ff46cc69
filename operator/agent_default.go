package operator

import (
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Every dispatch names its principal, and every principal meets a limits
// record (DESIGN.md section 5, "The operator's limits per agent"): its
// own, or else its controller's default record (agent msg.DefaultAgent,
// "*"), so that a name the operator never set limits for is limited by
// the default, never unlimited by accident. The default is a record like
// any other: signed, journaled as agent-limits, replayed, in the snapshot
// (state.Agents). Counts stay per principal: each principal under the
// default counts its own day, as under a record of its own.
//
// A store without a default record for a controller (every store before
// the default existed, and a new one until the operator sets it) limits a
// principal without its own record by its grants and the payer alone, as
// before: the legacy allow-list configs, whose principals are uid:N, keep
// working unchanged, and the host logs once per principal that it runs
// under no record.

// limitsOf is the limits record in force for agent of controller ctrl:
// its own, else the controller's default, else nil. An agent "" (an
// attempt reserved before agents, redelivered) meets no record: its
// reservation was admitted as it was then.
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

// refuseNoAgent refuses dispatch c when it names no principal, before
// anything is admitted or journaled: a controller before agents (or one
// that omits the name) would otherwise pass every agent's limits and
// approval marks. Nil when it names one.
func (s *Store) refuseNoAgent(ctrl string, c *hostlog.CheckedDispatch) *msg.Refusal {
	if c.Agent != "" {
		return nil
	}
	s.logRefusal(c, "the dispatch names no agent", "controller", ctrl)
	return &msg.Refusal{Code: msg.CodeBadRequest, Reason: noAgentReason}
}

// warnNoRecord logs once per principal that agent of controller ctrl is
// admitted under no limits record: neither its own nor a default one.
func (s *Store) warnNoRecord(ctrl, agent string) {
	s.warnOnce("no-limits/"+ctrl+"/"+agent, "steward-operator: agent has no limits record and its controller no default one (agent set '*'): only its grants and the payer limit it",
		"controller", ctrl, "agent", agent)
}

// defaultShow is the view of agent under its controller's default record
// al: the default's limits, the agent's own counts of today.
func (s *Store) defaultShow(al *agentLimits, agent string) views.AgentView {
	v := s.agentView(al)
	n := s.st.countsOn(agentKey{al.Limits.Controller, agent}, utcDay(s.clockLocked()), "", false, 0)
	v.Agent, v.Record = agent, msg.DefaultAgent
	v.CallsToday, v.CreditsToday, v.ConversationsToday = n.calls, n.credits, n.convs
	return v
}
