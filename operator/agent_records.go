package operator

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The operator's limits per agent (DESIGN.md section 5, "The operator's
// limits per agent") are records of their own, not fields of a grant: a
// grant is per application and controller, while an agent's limits span
// every application its controller reaches, and the approvals issue adds
// its field to them. Each is a signed msg.AgentLimits (the operator's
// hybrid key, as a grant), journaled as one agent-limits record; a new
// record for the same controller and agent has the next revision and
// replaces the one before it.

// Agent name bounds (P1.6): 1 to 32 of a-z0-9_-, first a letter.
const maxAgentName = 32

// Rate bounds of an agent's limits: the bucket is kept in exact integers
// (tokenUnit a call), which these keep far from overflow.
const (
	maxAgentRate  = 1_000_000 // calls per minute
	maxAgentBurst = 10_000    // calls at once
)

// agentForeground is the principal of the controller's foreground socket:
// reserved, so that no configured agent is named like it.
const agentForeground = "foreground"

// ValidAgentName checks the name of a configured agent, as `agent set`
// takes it: "foreground" and names with ':' ("uid:N") are the principals
// of the foreground socket and of legacy allow-list entries.
func ValidAgentName(s string) error {
	if s == agentForeground {
		return Refusedf("agent name %q is reserved for the foreground socket", s)
	}
	if strings.Contains(s, ":") {
		return Refusedf("agent name %s: ':' is reserved (uid:N names a legacy allow-list peer)", strconv.Quote(trunc(s, 80)))
	}
	ok := len(s) >= 1 && len(s) <= maxAgentName && s[0] >= 'a' && s[0] <= 'z'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return Refusedf("agent name %s: must be 1 to %d of a-z0-9_-, first a letter", strconv.Quote(trunc(s, 80)), maxAgentName)
	}
	return nil
}

// ValidDispatchAgent checks a dispatch's agent: a configured agent's
// name, "foreground" or "uid:N".
func ValidDispatchAgent(s string) error {
	if s == agentForeground {
		return nil
	}
	if n, ok := strings.CutPrefix(s, "uid:"); ok {
		if v, err := strconv.ParseUint(n, 10, 32); err == nil && strconv.FormatUint(v, 10) == n {
			return nil
		}
	} else if ValidAgentName(s) == nil {
		return nil
	}
	return fmt.Errorf("agent %s is none of a configured agent's name, %s and uid:N", strconv.Quote(trunc(s, 80)), agentForeground)
}

// validLimitsAgent checks the agent a limits record names: any principal
// a dispatch can name (a configured agent's name, "foreground" or
// "uid:N"), so that every caller can be limited and marked for approval,
// the foreground socket's and a legacy allow-list peer's too.
func validLimitsAgent(s string) error {
	if ValidDispatchAgent(s) == nil {
		return nil
	}
	if strings.HasPrefix(s, "uid:") {
		return Refusedf("agent %s: uid:N names a legacy allow-list peer by its uid, in decimal (0 to 4294967295)", strconv.Quote(trunc(s, 80)))
	}
	return ValidAgentName(s)
}

// validAgentLimits checks the bounds of l (msg.MaxAgentOperations
// patterns, each APPLICATION/OPERATION and valid for path.Match;
// msg.MaxConversationsPerDay; a rate of at least 1, a burst only with a
// rate).
func validAgentLimits(l *msg.AgentLimits) error {
	if err := validLimitsAgent(l.Agent); err != nil {
		return err
	}
	if err := validName("controller", l.Controller); err != nil {
		return err
	}
	if len(l.Operations) > msg.MaxAgentOperations {
		return Refusedf("agent %s: %d operation patterns, the bound is %d", l.Agent, len(l.Operations), msg.MaxAgentOperations)
	}
	for _, p := range l.Operations {
		app, op, ok := strings.Cut(p, "/")
		if len(p) > maxPatternLen || !ok || app == "" || op == "" || strings.Contains(op, "/") {
			return Refusedf("agent %s: operation pattern %s: must be APPLICATION/OPERATION, at most %d bytes", l.Agent, strconv.Quote(trunc(p, 80)), maxPatternLen)
		}
		for _, side := range []string{app, op} {
			if _, err := path.Match(side, ""); err != nil {
				return Refusedf("agent %s: operation pattern %s: %v", l.Agent, strconv.Quote(p), err)
			}
		}
	}
	if l.ConversationsPerDay > msg.MaxConversationsPerDay {
		return Refusedf("agent %s: %d conversations per day, the bound is %d", l.Agent, l.ConversationsPerDay, msg.MaxConversationsPerDay)
	}
	if l.RatePerMinute != nil && *l.RatePerMinute == 0 {
		return Refusedf("agent %s: a rate of 0 calls per minute admits nothing: give --calls-per-day 0 to stop the agent", l.Agent)
	}
	if l.RatePerMinute != nil && *l.RatePerMinute > maxAgentRate {
		return Refusedf("agent %s: a rate of %d calls per minute, the bound is %d", l.Agent, *l.RatePerMinute, maxAgentRate)
	}
	if l.Burst > maxAgentBurst {
		return Refusedf("agent %s: a burst of %d calls, the bound is %d", l.Agent, l.Burst, maxAgentBurst)
	}
	if l.RatePerMinute == nil && l.Burst != 0 {
		return Refusedf("agent %s: a burst needs a rate (--rate)", l.Agent)
	}
	if l.Revision == 0 {
		return Refusedf("agent %s: revision 0: the first record of an agent is revision 1", l.Agent)
	}
	return validApprovalPolicy(l.Agent, l.Approval)
}

// agentKey names one agent of one controller.
type agentKey struct{ controller, agent string }

// agentLimits is an agent's selected limits record and its signed bytes.
type agentLimits struct {
	l      msg.AgentLimits
	signed []byte
}

// checkAgentLimits verifies a signed limits record for the store: signed
// by the operator, within the bounds, of a pinned controller, and the next
// revision of its agent's records.
func (st *state) checkAgentLimits(signed []byte, pub *wire.HybridPublicKey) (msg.AgentLimits, error) {
	l, err := msg.VerifyAgentLimits(signed, pub)
	if err != nil {
		return l, Refusedf("%v", err)
	}
	if err := validAgentLimits(&l); err != nil {
		return l, err
	}
	if _, ok := st.controllers[l.Controller]; !ok {
		return l, Refusedf("agent %s: no controller named %s", l.Agent, l.Controller)
	}
	var want uint64 = 1
	if prev := st.agents[agentKey{l.Controller, l.Agent}]; prev != nil {
		want = prev.l.Revision + 1
	}
	if l.Revision != want {
		return l, Refusedf("agent %s of controller %s: revision %d must be %d", l.Agent, l.Controller, l.Revision, want)
	}
	return l, nil
}

// addAgentLimits selects l as its agent's limits.
func (st *state) addAgentLimits(l msg.AgentLimits, signed []byte) {
	k := agentKey{l.Controller, l.Agent}
	if st.agents[k] == nil {
		st.agentOrder = append(st.agentOrder, k)
	}
	st.agents[k] = &agentLimits{l: l, signed: bytes.Clone(signed)}
}

func (rp *replayer) AgentLimits(_ journal.Record, b *hostlog.AgentLimits) error {
	l, err := rp.st.checkAgentLimits(b.Limits, rp.pub)
	if err != nil {
		return err
	}
	rp.st.addAgentLimits(l, b.Limits)
	return nil
}
