package operator

import (
	"fmt"

	"github.com/stewardrt/steward/wire/msg"
)

// The bounds of asks that no caller can choose its way past (DESIGN.md
// section 5, "Approvals", and section 8). An agent names its
// conversations and its request ids, so a bound counted by either is one
// it can step around by naming new ones; these are counted by what the
// agent cannot choose: its controller, its own name and the UTC day.
//
//   - Raising an ask counts one call of the asking agent's day against its
//     limits' calls per day, counted from the ask record (which carries the
//     day), so a restart refills nothing. The call an approved ask goes on
//     to is that same call: its reservation counts its credits, never a
//     second call (askCounted).
//   - The asks pending at once are bounded per agent, per controller, and
//     by the bytes of their calls per controller (AskBounds): each pending
//     ask keeps its request body in the host's memory until it is decided.
//   - The asks advisors decide are bounded per asking agent and UTC day
//     (msg.ApprovalPolicy.AgentAnswerDayBound), besides the bound per
//     conversation, counted from the ask-answer records (AdvisorDays).
//
// Each refusal is one line naming its bound; nothing is journaled,
// reserved, consented to or charged.

// Defaults of AskBounds: what a host whose operator set nothing bounds
// its pending asks by.
const (
	DefaultPendingAsksPerAgent          = 16
	DefaultPendingAsksPerController     = 256
	DefaultPendingAskBytesPerController = 4 << 20
)

// AskBounds are the operator's caps on the asks pending at once
// (Options.AskBounds; `steward-operator serve --pending-asks-per-agent`,
// `--pending-asks-per-controller`, `--pending-ask-bytes`). A zero field
// is its default.
type AskBounds struct {
	PerAgent, PerController int
	// BytesPerController bounds the request bodies of one controller's
	// pending asks together.
	BytesPerController int64
}

// withDefaults is b with each zero field its default.
func (b AskBounds) withDefaults() AskBounds {
	if b.PerAgent <= 0 {
		b.PerAgent = DefaultPendingAsksPerAgent
	}
	if b.PerController <= 0 {
		b.PerController = DefaultPendingAsksPerController
	}
	if b.BytesPerController <= 0 {
		b.BytesPerController = DefaultPendingAskBytesPerController
	}
	return b
}

// answerDay is what advisors decided of one asking agent's asks on its
// latest UTC day.
type answerDay struct {
	Day int64
	N   uint64
}

// askNothingDone ends the refusals of a raise: nothing of the call is
// recorded anywhere.
const askNothingDone = "; nothing was journaled, reserved or sent"

// raiseRefusal is why ask k (raised on day k.CallDay) may not be raised
// now, with s.mu held: the agent's calls of the day are spent, or a cap
// of pending asks would be passed. Nil when it may; the caller counts its
// call (askCall) before the ask record is appended.
func (s *Store) raiseRefusal(k *ask) *msg.Refusal {
	st := s.st
	agent := agentKey{k.Controller, k.Agent}
	if al := st.Agents[agent]; al != nil && al.Limits.CallsPerDay != nil && k.CallDay != 0 {
		if n := st.countsOn(agent, k.CallDay, "", false, 0); n.calls >= *al.Limits.CallsPerDay {
			s.log.Info("steward-operator: refused: the agent's daily call limit is reached (an ask)", "controller", k.Controller,
				"agent", k.Agent, "calls", n.calls, "callsPerDay", *al.Limits.CallsPerDay)
			return &msg.Refusal{Code: msg.CodeAgentLimit, Reason: "the daily call limit for this agent is reached: it refills at " + nextUTCDay(k.CallDay)}
		}
	}
	b := s.askBounds
	var ofAgent, ofCtrl int
	var bytes int64
	for _, p := range st.asksPending {
		if p.Controller != k.Controller {
			continue
		}
		ofCtrl++
		bytes += int64(len(p.Body))
		if p.Agent == k.Agent {
			ofAgent++
		}
	}
	pending := func(why string) *msg.Refusal {
		return &msg.Refusal{Code: msg.CodeAgentLimit, Reason: why + ": a call needing approval is refused until one is answered or expires" + askNothingDone}
	}
	switch {
	case ofAgent >= b.PerAgent:
		return pending(fmt.Sprintf("%d asks of agent %s are pending, the bound of pending asks per agent", ofAgent, k.Agent))
	case ofCtrl >= b.PerController:
		return pending(fmt.Sprintf("%d asks of this controller's agents are pending, the bound of pending asks per controller", ofCtrl))
	case bytes+int64(len(k.Body)) > b.BytesPerController:
		return pending(fmt.Sprintf("the pending asks of this controller's agents hold %d bytes of calls and this call's %d would pass the bound of %d bytes of pending asks per controller",
			bytes, len(k.Body), b.BytesPerController))
	}
	return nil
}

// askCall counts the call of ask k on its agent's day k.CallDay: at its
// raise and on replay of its record. An ask recorded before asks counted
// (CallDay 0) counts none.
func (st *state) askCall(k *ask) {
	if k.Agent == "" || k.CallDay == 0 {
		return
	}
	u := st.useOf(agentKey{k.Controller, k.Agent}, k.CallDay)
	u.roll(k.CallDay)
	u.Calls++
}

// askUncall gives back what askCall counted, when the ask record could
// not be appended and its day is still the agent's latest.
func (st *state) askUncall(k *ask) {
	u := st.AgentUse[agentKey{k.Controller, k.Agent}]
	if k.Agent == "" || k.CallDay == 0 || u == nil || u.Day != k.CallDay || u.Calls == 0 {
		return
	}
	u.Calls--
}

// askCounted reports whether attempt id's call was counted by its ask's
// raise: its reservation then counts no second call, and its admission
// again after the approval is not held to the day's calls (the raise was).
func (st *state) askCounted(id string) bool {
	k := st.askByAttempt[id]
	return k != nil && k.CallDay != 0
}

// advisorDayCount counts an advisor's decision of ask k at (unix ms) on
// the asking agent's day: from ask-answer records, live and on replay.
func (st *state) advisorDayCount(k *ask, at int64) {
	key := agentKey{k.Controller, k.Agent}
	d := dayOfMs(at)
	n := st.AdvisorDays[key]
	if n == nil {
		n = &answerDay{Day: d}
		st.AdvisorDays[key] = n
	}
	if d > n.Day {
		n.Day, n.N = d, 0
	}
	n.N++
}

// advisorDayRefusal is why no advisor may decide ask k on day (with s.mu
// held): the asking agent's answers of the day are spent. "" when they
// are not.
func (st *state) advisorDayRefusal(k *ask, day int64) string {
	var p *msg.ApprovalPolicy
	if al := st.Agents[agentKey{k.Controller, k.Agent}]; al != nil {
		p = al.Limits.Approval
	}
	bound := p.AgentAnswerDayBound()
	var n uint64
	if c := st.AdvisorDays[agentKey{k.Controller, k.Agent}]; c != nil && c.Day >= day {
		n = c.N
	}
	if n < bound {
		return ""
	}
	return fmt.Sprintf("agent answers spent: %d of %d for agent %s today, the bound of agent answers per day; this ask waits for a human (the day refills at %s)",
		n, bound, k.Agent, nextUTCDay(day))
}

// dayOfMs is the UTC day of a unix millisecond time.
func dayOfMs(ms int64) int64 { return ms / 86_400_000 }

// raiseRefused is a raise a bound refused (raiseRefusal): nothing was
// journaled.
type raiseRefused struct{ ref *msg.Refusal }

func (e *raiseRefused) Error() string { return e.ref.Reason }

// raiseChecked makes ask k's id and checks its bounds, with s.askMu held
// (which orders every ask record's append, so no other raise lands
// between the check and k's record), and counts its call. A cap that
// refuses is checked again once the pending asks past their expiry are
// expired: an ask that is due no longer holds its place.
func (s *Store) raiseChecked(k *ask) error {
	s.mu.Lock()
	ref := s.raiseRefusal(k)
	s.mu.Unlock()
	if ref != nil {
		if err := s.expireDueLocked(""); err != nil {
			s.log.Error("steward-operator: ask expiry record", "err", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref != nil {
		if ref = s.raiseRefusal(k); ref != nil {
			return &raiseRefused{ref}
		}
	}
	k.ID, k.State = s.st.newAskID(), msg.AskPending
	s.st.askCall(k)
	return nil
}
