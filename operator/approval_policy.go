package operator

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// The approval policy of an agent's limits (msg.ApprovalPolicy, DESIGN.md
// section 5, "Approvals") is checked with the rest of the record, when
// `agent set` signs it and when replay or an import reads it back, so that
// a record the host holds never marks operations with a pattern it cannot
// match, parks a call past the proxy's bound, or names an advisor no
// configured agent can be.

// Bounds of a policy's times that msg does not name: a park shorter than a
// second could not outlast one round trip of the controller's collect,
// and an ask that expires within a minute leaves no human time to answer.
const (
	MinApprovalPark   = time.Second
	MinApprovalExpiry = time.Minute
)

// validApprovalPolicy checks the approval policy of agent's limits: nil
// (no policy) passes. Durations are checked as they take effect (0 is the
// default), so a refusal names the value the host would use.
func validApprovalPolicy(agent string, p *msg.ApprovalPolicy) error {
	if p == nil {
		return nil
	}
	if err := validApprovalOperations(agent, p.Operations); err != nil {
		return err
	}
	if err := validApprovalTimes(agent, p); err != nil {
		return err
	}
	if p.OnTimeout != "" && p.OnTimeout != msg.VerdictApprove && p.OnTimeout != msg.VerdictDeny {
		return Refusedf("agent %s: on-timeout verdict %s: must be approve or deny", agent, strconv.Quote(trunc(string(p.OnTimeout), 80)))
	}
	if err := validAdvisors(agent, p.Advisors); err != nil {
		return err
	}
	if p.AgentAnswers != nil && *p.AgentAnswers > msg.MaxAgentAnswers {
		return Refusedf("agent %s: %d agent answers per conversation, the bound is %d", agent, *p.AgentAnswers, msg.MaxAgentAnswers)
	}
	return nil
}

// validApprovalOperations checks the marked patterns: at least one, at
// most msg.MaxApprovalOperations, each APPLICATION/OPERATION as the
// limits' own operation patterns (path.Match on each side).
func validApprovalOperations(agent string, ops []string) error {
	if len(ops) == 0 {
		return Refusedf("agent %s: an approval policy that marks no operation: give --approve-ops APP/OP", agent)
	}
	if len(ops) > msg.MaxApprovalOperations {
		return Refusedf("agent %s: %d approval patterns, the bound is %d", agent, len(ops), msg.MaxApprovalOperations)
	}
	for _, p := range ops {
		app, op, ok := strings.Cut(p, "/")
		if len(p) > maxPatternLen || !ok || app == "" || op == "" || strings.Contains(op, "/") {
			return Refusedf("agent %s: approval pattern %s: must be APPLICATION/OPERATION, at most %d bytes", agent, strconv.Quote(trunc(p, 80)), maxPatternLen)
		}
		for _, side := range []string{app, op} {
			if _, err := path.Match(side, ""); err != nil {
				return Refusedf("agent %s: approval pattern %s: %v", agent, strconv.Quote(p), err)
			}
		}
	}
	return nil
}

// validApprovalTimes checks the park window (MinApprovalPark to
// msg.MaxApprovalPark, and no longer than the expiry: a call never parks
// past its ask's end) and the expiry (MinApprovalExpiry to
// msg.MaxApprovalExpiry). A negative value is refused as what it is.
func validApprovalTimes(agent string, p *msg.ApprovalPolicy) error {
	park, expiry := p.Park(), p.Expiry()
	if p.ParkMs < 0 || park < MinApprovalPark || park > msg.MaxApprovalPark {
		return Refusedf("agent %s: a park of %v: must be %v to %v", agent, time.Duration(p.ParkMs)*time.Millisecond, MinApprovalPark, msg.MaxApprovalPark)
	}
	if p.ExpiryMs < 0 || expiry < MinApprovalExpiry || expiry > msg.MaxApprovalExpiry {
		return Refusedf("agent %s: an ask expiry of %v: must be %v to %v", agent, time.Duration(p.ExpiryMs)*time.Millisecond, MinApprovalExpiry, msg.MaxApprovalExpiry)
	}
	if park > expiry {
		return Refusedf("agent %s: a park of %v is longer than the ask expiry of %v", agent, park, expiry)
	}
	return nil
}

// validAdvisors checks the advisors: at most msg.MaxAdvisors configured
// agents' names, each once, never the agent itself (an advisor never
// answers an ask its own identity raised).
func validAdvisors(agent string, advisors []string) error {
	if len(advisors) > msg.MaxAdvisors {
		return Refusedf("agent %s: %d advisors, the bound is %d", agent, len(advisors), msg.MaxAdvisors)
	}
	seen := make(map[string]bool, len(advisors))
	for _, a := range advisors {
		if err := ValidAgentName(a); err != nil {
			return Refusedf("agent %s: advisor: %s", agent, strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
		}
		if a == agent {
			return Refusedf("agent %s: an agent is never its own advisor (an advisor never answers an ask raised by its own identity)", agent)
		}
		if seen[a] {
			return Refusedf("agent %s: advisor %s is named twice", agent, a)
		}
		seen[a] = true
	}
	return nil
}
