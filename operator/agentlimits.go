package operator

import (
	"path"
	"slices"
	"strings"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The operator's limits per agent at admission (DESIGN.md section 5, "The
// operator's limits per agent"). A dispatch naming an agent that has a
// limits record is checked against it at admission and again at the last
// moment (admit and recheck, admission.go), after the grant and the purse:
// a call must pass both. The daily counts are kept from durable records,
// as the grant's: admission holds one call, the charge and the
// conversation's share until the reservation is journaled (or given back
// by a refusal), and replay counts every reserve.v2 that names an agent,
// releases excepted, so a restart refills nothing. The rate is a token
// bucket in memory: a restart refills it, which the issue allows.

// agentUse is one agent's counts on its latest UTC day and its rate
// bucket. Counts exist whether or not the agent has a limits record, so
// that a record set during a day counts what the day already spent.
type agentUse struct {
	Day     int64
	Calls   uint64
	Credits uint64
	Convs   map[string]*convUse // the day's conversations
	Advised uint64              // the day's asks of the agent advisors decided (ask_bounds.go)
	// tokens is the rate bucket in 1/tokenUnit of a call, as of filled
	// (unix ms); primed is false until the first call fills it.
	tokens int64
	filled int64
	primed bool
}

// convUse is one conversation's share of an agent's day.
type convUse struct{ Calls, Credits uint64 }

// tokenUnit is one call of the rate bucket: a rate of N calls a minute
// refills N units a millisecond, so the bucket is exact integers.
const tokenUnit = 60_000

// roll moves u to day d when d is later: a new day counts from nothing.
// An earlier day (never, since the store's clock never runs backwards
// past a day recorded) counts on the latest, as a grant's does.
func (u *agentUse) roll(d int64) {
	if d > u.Day || u.Convs == nil {
		u.Day, u.Calls, u.Credits, u.Convs, u.Advised = max(d, u.Day), 0, 0, map[string]*convUse{}, 0
	}
}

// agentHold counts one call of charge by agent (of controller ctrl) in
// conversation conv on day d for attempt id: at admission, and on replay
// of its reservation. No agent counts nothing; the call of an attempt its
// ask counted (askCounted) counts its charge, not a second call.
func (st *state) agentHold(id, ctrl, agent, conv string, d int64, charge uint64) {
	if agent == "" {
		return
	}
	k := agentKey{ctrl, agent}
	u := st.useOf(k, d)
	u.roll(d)
	if !st.askCounted(id) {
		u.Calls++
	}
	u.Credits += charge
	if conv != "" {
		cu := u.Convs[conv]
		if cu == nil {
			cu = &convUse{}
			u.Convs[conv] = cu
		}
		cu.Calls++
		cu.Credits += charge
	}
}

// useOf is agent k's counts, made (on day d) when it has none yet.
func (st *state) useOf(k agentKey, d int64) *agentUse {
	u := st.AgentUse[k]
	if u == nil {
		u = &agentUse{Day: d}
		st.AgentUse[k] = u
	}
	return u
}

// agentUnhold gives back what agentHold counted for attempt id, when its
// day is still the agent's latest: a refusal after admission, a release.
func (st *state) agentUnhold(id, ctrl, agent, conv string, d int64, charge uint64) {
	u := st.AgentUse[agentKey{ctrl, agent}]
	asked := st.askCounted(id)
	if agent == "" || u == nil || u.Day != d || u.Calls == 0 && !asked {
		return
	}
	if !asked {
		u.Calls--
	}
	u.Credits -= min(charge, u.Credits)
	if cu := u.Convs[conv]; cu != nil {
		cu.Calls--
		cu.Credits -= min(charge, cu.Credits)
		if cu.Calls == 0 {
			delete(u.Convs, conv)
		}
	}
}

// agentSettle gives back to attempt a's agent the part of its reservation
// its outcome did not charge (released: a refusal settled at the grant's
// refusal price), when its day is still the agent's latest: an agent's
// credits count what was charged, as the purse does. The call still
// counts as a call.
func (st *state) agentSettle(a *attempt, released uint64) {
	u := st.AgentUse[agentKey{a.Controller, a.Agent}]
	if a.Agent == "" || released == 0 || u == nil || u.Day != a.Day {
		return
	}
	u.Credits -= min(released, u.Credits)
	if cu := u.Convs[a.Conversation]; cu != nil {
		cu.Credits -= min(released, cu.Credits)
	}
}

// agentCounts is what an agent spent on one day, less a call's own hold.
type agentCounts struct {
	calls, credits uint64
	conv           convUse // the call's conversation
	convKnown      bool    // the conversation was counted already today
	convs          int     // the day's conversations
}

// countsOn reads the agent's counts of day d, less own (the call's own
// hold, of charge in conv, when it is checked again).
func (st *state) countsOn(k agentKey, d int64, conv string, own bool, charge uint64) agentCounts {
	u := st.AgentUse[k]
	if u == nil || u.Day < d || u.Convs == nil {
		return agentCounts{}
	}
	if u.Day > d {
		// The day turned since the call was held: it counts on the
		// latest day, which its own hold is not part of.
		own = false
	}
	n := agentCounts{calls: u.Calls, credits: u.Credits, convs: len(u.Convs)}
	if cu := u.Convs[conv]; conv != "" && cu != nil {
		n.conv, n.convKnown = *cu, true
	}
	if own {
		n.calls -= min(1, n.calls)
		n.credits -= min(charge, n.credits)
		n.conv.Calls -= min(1, n.conv.Calls)
		n.conv.Credits -= min(charge, n.conv.Credits)
		if n.convKnown && n.conv.Calls == 0 {
			n.convKnown = false
			n.convs--
		}
	}
	return n
}

// agentAllows reports whether limits l let the agent call operation op of
// application app: a pattern "APP/OP" matches both sides (path.Match); a
// listing (op "") is allowed when a pattern's application matches. No
// patterns allow everything the grant covers.
func agentAllows(l *msg.AgentLimits, app, op string) bool {
	return patternsAllow(l.Operations, app, op)
}

// patternsAllow is agentAllows over the patterns ps.
func patternsAllow(ps []string, app, op string) bool {
	if len(ps) == 0 {
		return true
	}
	for _, p := range ps {
		ap, opp, _ := strings.Cut(p, "/")
		if ok, err := path.Match(ap, app); err != nil || !ok {
			continue
		}
		if op == "" {
			return true
		}
		if ok, err := path.Match(opp, op); err == nil && ok {
			return true
		}
	}
	return false
}

// agentRefusal checks dispatch d of controller c, of charge on day, against
// its agent's limits, with s.mu held: at admission (own false, which also
// takes a token of the rate) or again at the last moment (own true: the
// call's own hold is not counted against it, and the rate is not taken
// twice). The record is the agent's own or its controller's default
// (limitsOf), while the counts are the agent's own. Nil when the dispatch
// names no agent (an old reservation redelivered), no record applies, or
// it allows the call.
func (s *Store) agentRefusal(c *controller, d *hostlog.CheckedDispatch, charge uint64, day, nowMs int64, own bool) *msg.Refusal {
	k := agentKey{c.Name, d.Agent}
	al := s.st.limitsOf(c.Name, d.Agent)
	if al == nil {
		return nil
	}
	l := &al.Limits
	refusal := func(why, reason string, args ...any) *msg.Refusal {
		s.logRefusal(d, why, append([]any{"controller", c.Name, "agent", d.Agent, "record", l.Agent, "revision", l.Revision}, args...)...)
		return &msg.Refusal{Code: msg.CodeAgentLimit, Reason: reason}
	}
	refill := nextUTCDay(day)
	if !agentAllows(l, d.Application, d.Operation) {
		return refusal("the agent's limits do not allow the call",
			"the operator's limits for this agent do not allow "+callDesc(d)+": calls resume once the operator allows it")
	}
	n := s.st.countsOn(k, day, d.Conversation, own, charge)
	convs := int(l.ConversationsPerDay)
	if convs == 0 {
		convs = msg.DefaultConversationsPerDay
	}
	switch {
	case l.CallsPerDay != nil && !s.st.askCounted(d.Attempt) && n.calls >= *l.CallsPerDay: // an ask's raise held its call to it
		return refusal("the agent's daily call limit is reached", "the daily call limit for this agent is reached: it refills at "+refill,
			"calls", n.calls, "callsPerDay", *l.CallsPerDay)
	case l.CreditsPerDay != nil && charge > 0 && n.credits+charge > *l.CreditsPerDay:
		return refusal("the agent's daily credit limit is reached", "the daily credit limit for this agent is reached: it refills at "+refill,
			"credits", n.credits, "charge", charge, "creditsPerDay", *l.CreditsPerDay)
	case d.Conversation != "" && !n.convKnown && n.convs >= convs:
		return refusal("the agent's daily conversation count is reached", "the daily limit of conversations for this agent is reached: a new conversation can start at "+refill,
			"conversations", n.convs, "conversationsPerDay", convs)
	case d.Conversation != "" && l.CreditsPerConversation != nil && charge > 0 && n.conv.Credits+charge > *l.CreditsPerConversation:
		return refusal("the conversation's daily credit limit is reached", "the credit limit of this conversation for this agent is reached: it refills at "+refill,
			"conversation", d.Conversation, "credits", n.conv.Credits, "charge", charge, "creditsPerConversation", *l.CreditsPerConversation)
	}
	if l.RatePerMinute == nil || own {
		return nil
	}
	if at, ok := s.st.useOf(k, day).takeToken(l, nowMs); !ok {
		return refusal("the agent's rate limit is reached", "the rate limit for this agent is reached: it refills at "+
			time.UnixMilli((at+999)/1000*1000).UTC().Format(time.RFC3339))
	}
	return nil
}

// takeToken takes one call from u's rate bucket at nowMs under limits l
// (capacity the burst, 0 meaning 1; RatePerMinute calls a minute refill
// it). When the bucket holds less than a call it takes nothing and says
// when (unix ms) it next holds one.
func (u *agentUse) takeToken(l *msg.AgentLimits, nowMs int64) (int64, bool) {
	// hostlog.ValidAgentLimits bounds both: the products stay far below 2^63.
	rate := int64(*l.RatePerMinute)
	capacity := int64(max(l.Burst, 1)) * tokenUnit
	switch {
	case !u.primed:
		u.tokens, u.filled, u.primed = capacity, nowMs, true
	case nowMs > u.filled:
		u.tokens = min(capacity, u.tokens+(nowMs-u.filled)*rate)
		u.filled = nowMs
	}
	u.tokens = min(u.tokens, capacity)
	if u.tokens < tokenUnit {
		return u.filled + (tokenUnit-u.tokens+rate-1)/rate, false
	}
	u.tokens -= tokenUnit
	return 0, true
}

// nextUTCDay is the start of the UTC day after day, as a refusal names it.
func nextUTCDay(day int64) string {
	return time.UnixMilli((day + 1) * msPerDay).UTC().Format(time.RFC3339)
}

// agentOps is a copy of the operation patterns of d's agent, for a
// listing filtered by them (nil: not filtered by the agent).
func (s *Store) agentOps(ctrl string, d *hostlog.CheckedDispatch) []string {
	return s.st.limitsOf(ctrl, d.Agent).operations()
}

// operations is a copy of al's operation patterns; nil for no record.
func (al *agentLimits) operations() []string {
	if al == nil {
		return nil
	}
	return slices.Clone(al.Limits.Operations)
}
