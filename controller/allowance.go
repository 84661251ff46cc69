package controller

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// OverviewLimits is what the operator's limits for the calling agent still
// allow today (msg.AllowanceResult, asked of the host on a route's forward
// channel): its own, never another agent's. Reported is false when the
// host reports no per-agent limits (one before them refuses the question)
// or could not be asked; Note says which.
type OverviewLimits struct {
	Reported bool `json:"reported"`
	// Limited: the operator set limits for this agent; false, it is
	// limited only by the grant and the payer.
	Limited bool `json:"limited,omitempty"`
	// Operations are the "APPLICATION/OPERATION" patterns the agent may
	// call (none: whatever the grant covers).
	Operations  []string `json:"operations,omitempty"`
	CallsLeft   *uint64  `json:"callsLeft,omitempty"`   // admitted calls left today
	CreditsLeft *uint64  `json:"creditsLeft,omitempty"` // credits left today
	RefillsAt   string   `json:"refillsAt,omitempty"`   // when the day's counts refill (RFC 3339, UTC)
	Note        string   `json:"note,omitempty"`
}

// The notes of an overview whose limits the host did not report.
const (
	limitsNone    = "the host reports no per-agent limits: your calls are limited by the operator's grant and the payer alone"
	limitsUnasked = "the host could not be asked for your limits now: its control socket is not reachable"
	limitsNoLimit = "the operator set no limits for you: your calls are limited by the operator's grant and the payer alone"
)

// allowance asks the host on the control channel what agent may still
// spend today. A host
// that refuses the question (one before per-agent limits answers an
// unknown request type with a refusal) reports no per-agent limits; an
// answer about another agent, or a malformed one, is not shown.
func (c *Controller) allowance(ctx context.Context, agent string) OverviewLimits {
	env, _, err := c.ctl.call(ctx, msg.TypeAllowance, msg.Allowance{Agent: agent})
	if err != nil {
		c.log.Warn("asking the host for an agent's allowance", "agent", agent, "err", err)
		return OverviewLimits{Note: "the host did not answer for your limits now"}
	}
	switch env.T {
	case msg.TypeAllowanceResult:
		var r msg.AllowanceResult
		if err := env.Decode(&r); err != nil || r.Agent != agent {
			c.log.Error("the host's allowance answer is malformed or for another agent", "agent", agent, "answered", r.Agent, "err", err)
			return OverviewLimits{Note: "the host's answer about your limits could not be read"}
		}
		if !r.Limited {
			return OverviewLimits{Reported: true, Note: limitsNoLimit}
		}
		l := OverviewLimits{Reported: true, Limited: true, Operations: r.Operations, CallsLeft: r.CallsLeft, CreditsLeft: r.CreditsLeft}
		if r.RefillsAt > 0 {
			l.RefillsAt = time.UnixMilli(r.RefillsAt).UTC().Format(time.RFC3339)
		}
		return l
	case msg.TypeRefused:
		var r msg.Refusal
		env.Decode(&r)
		c.log.Info("the host reports no per-agent limits", "code", r.Code, "reason", r.Reason)
		return OverviewLimits{Note: limitsNone}
	default:
		c.log.Error("the host answered an allowance with an unexpected frame", "type", env.T)
		return OverviewLimits{Note: "the host's answer about your limits could not be read"}
	}
}

// allows reports whether the limits let the agent use application at all:
// some operation pattern names it (as the host admits a listing). Limits
// that name no operations, or were not reported, hide nothing.
func (l OverviewLimits) allows(application string) bool {
	if !l.Limited || len(l.Operations) == 0 {
		return true
	}
	for _, p := range l.Operations {
		app, _, _ := strings.Cut(p, "/")
		if ok, err := path.Match(app, application); err == nil && ok {
			return true
		}
	}
	return false
}
