package operator

import (
	"fmt"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// SetAgentLimits signs the next revision of an agent's limits with the
// operator's hybrid key and journals it; it replaces the one before.
func (s *Store) SetAgentLimits(spec views.AgentSpec) (views.AgentView, error) {
	if s.key == nil {
		return views.AgentView{}, fmt.Errorf("store %s is open read-only", s.dir)
	}
	// Of two sets at once, the check refuses the second one's revision:
	// it is signed again by running the command again, never merged.
	s.mu.Lock()
	var rev uint64 = 1
	if prev := s.st.Agents[agentKey{spec.Controller, spec.Agent}]; prev != nil {
		rev = prev.Limits.Revision + 1
	}
	s.mu.Unlock()
	l := msg.AgentLimits{
		Controller: spec.Controller, Agent: spec.Agent, Revision: rev, Operations: spec.Operations,
		CallsPerDay: spec.CallsPerDay, CreditsPerDay: spec.CreditsPerDay, CreditsPerConversation: spec.CreditsPerConversation,
		ConversationsPerDay: spec.ConversationsPerDay, RatePerMinute: spec.RatePerMinute, Burst: spec.Burst,
		IssuedAt: s.clock().UnixMilli(), Approval: spec.Approval,
	}
	if err := hostlog.ValidAgentLimits(&l); err != nil {
		return views.AgentView{}, refusedInput(err)
	}
	signed, err := msg.SignAgentLimits(s.key, l)
	if err != nil {
		return views.AgentView{}, err
	}
	return s.ImportAgentLimits(signed)
}

// ImportAgentLimits journals agent limits already signed with the
// operator's key, refusing a record that does not verify, passes a bound
// or is not its agent's next revision.
func (s *Store) ImportAgentLimits(signed []byte) (views.AgentView, error) {
	var l msg.AgentLimits
	var v views.AgentView
	err := s.mutate(hostlog.KindAgentLimits, hostlog.AgentLimits{Limits: signed},
		func() (err error) { l, err = s.st.checkAgentLimits(signed, s.pub); return err },
		func() {
			s.st.addAgentLimits(l, signed)
			v = s.agentView(s.st.Agents[agentKey{l.Controller, l.Agent}])
		})
	return v, err
}

// AgentShow returns the limits of agent of controller ctrl.
func (s *Store) AgentShow(ctrl, agent string) (views.AgentView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.st.controller(ctrl); err != nil {
		return views.AgentView{}, err
	}
	al := s.st.limitsOf(ctrl, agent)
	switch {
	case al == nil:
		return views.AgentView{}, views.Refusedf("agent %s of controller %s has no limits record and its controller no default one (agent set '*'): only its grants and the payer limit it", agent, ctrl)
	case al.Limits.Agent != agent:
		return s.defaultShow(al, agent), nil
	}
	return s.agentView(al), nil
}

// Agents lists every agent's limits, in the order they were first set.
func (s *Store) Agents() []views.AgentView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]views.AgentView, 0, len(s.st.AgentOrder))
	for _, k := range s.st.AgentOrder {
		out = append(out, s.agentView(s.st.Agents[k]))
	}
	return out
}

func (s *Store) agentView(al *agentLimits) views.AgentView {
	l := al.Limits
	ops := l.Operations
	if ops == nil {
		ops = []string{}
	}
	convs := l.ConversationsPerDay
	if convs == 0 {
		convs = msg.DefaultConversationsPerDay
	}
	n := s.st.countsOn(agentKey{l.Controller, l.Agent}, utcDay(s.clockLocked()), "", false, 0)
	return views.AgentView{
		Controller: l.Controller, Agent: l.Agent, Revision: l.Revision, Operations: ops,
		CallsPerDay: l.CallsPerDay, CreditsPerDay: l.CreditsPerDay, CreditsPerConversation: l.CreditsPerConversation,
		ConversationsPerDay: convs, RatePerMinute: l.RatePerMinute, Burst: l.Burst,
		IssuedAt:   time.UnixMilli(l.IssuedAt).UTC().Format(time.RFC3339),
		CallsToday: n.calls, CreditsToday: n.credits, ConversationsToday: n.convs,
		Approval: l.Approval,
	}
}
