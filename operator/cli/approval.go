package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// approvalFlags are the flags of `agent set` that make its approval
// policy (msg.ApprovalPolicy): --approve-ops marks operations, and the
// others shape how their calls wait; without --approve-ops no policy is
// signed, and the others are refused rather than dropped.
type approvalFlags struct {
	ops, advisors listFlag
	park, expiry  time.Duration
	onTimeout     string
	answers       optUint
	answersPerDay optUint
}

// approvalFlagNames are the flags that only mean something with --approve-ops.
var approvalFlagNames = []string{"park", "ask-expiry", "on-timeout", "advisor", "agent-answers", "agent-answers-per-day"}

func (a *approvalFlags) define(fs *flag.FlagSet) {
	fs.Var(&a.ops, "approve-ops", "`APP/OP` pattern whose calls wait for an approval (path.Match on each side; repeatable or comma-separated)")
	fs.DurationVar(&a.park, "park", 0, fmt.Sprintf("how long a marked call waits inside the agent's MCP call (%v to %v; not given: %v)", hostlog.MinApprovalPark, msg.MaxApprovalPark, msg.DefaultApprovalPark))
	fs.DurationVar(&a.expiry, "ask-expiry", 0, fmt.Sprintf("how long an unanswered ask stays pending (%v to %v; not given: %v)", hostlog.MinApprovalExpiry, msg.MaxApprovalExpiry, msg.DefaultApprovalExpiry))
	fs.StringVar(&a.onTimeout, "on-timeout", "", "the verdict an unanswered ask expires to: approve or deny (not given: deny)")
	fs.Var(&a.advisors, "advisor", "configured agent `NAME` that may answer this agent's asks (repeatable or comma-separated; none: only humans answer)")
	fs.Var(&a.answers, "agent-answers", fmt.Sprintf("asks per conversation advisors may decide (0: none; not given: %d)", msg.DefaultAgentAnswers))
	fs.Var(&a.answersPerDay, "agent-answers-per-day", fmt.Sprintf("asks of this agent advisors may decide per UTC day, over all its conversations (0: none; at most %d; not given: %d)", msg.MaxAgentAnswersPerDay, msg.DefaultAgentAnswersPerDay))
}

// policy is the policy the flags make, nil without --approve-ops. A
// duration given is taken whole: 0 or less, or a part of a millisecond,
// is refused here, since the record's 0 means the default.
func (a *approvalFlags) policy(fs *flag.FlagSet) (*msg.ApprovalPolicy, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if len(a.ops) == 0 {
		for _, n := range approvalFlagNames {
			if given[n] {
				return nil, fmt.Errorf("%w: --%s without --approve-ops: it shapes the approval of marked operations, and none is marked", errUsage, n)
			}
		}
		return nil, nil
	}
	p := &msg.ApprovalPolicy{Operations: a.ops, OnTimeout: msg.Verdict(a.onTimeout), Advisors: a.advisors, AgentAnswers: a.answers.v, AgentAnswersPerDay: a.answersPerDay.v}
	for _, d := range []struct {
		name string
		v    time.Duration
		ms   *int64
	}{{"park", a.park, &p.ParkMs}, {"ask-expiry", a.expiry, &p.ExpiryMs}} {
		if !given[d.name] {
			continue
		}
		if d.v <= 0 || d.v%time.Millisecond != 0 {
			return nil, fmt.Errorf("%w: --%s %v: must be a positive whole number of milliseconds", errUsage, d.name, d.v)
		}
		*d.ms = d.v.Milliseconds()
	}
	return p, nil
}

// approvalText is the approval part of an agent's line in `agent show`
// and `agent list`: empty when nothing is marked, else its patterns and
// the values in force (defaults filled in).
func approvalText(p *msg.ApprovalPolicy) string {
	if p == nil {
		return ""
	}
	advisors := strings.Join(p.Advisors, ",")
	if advisors == "" {
		advisors = "-"
	}
	return fmt.Sprintf("\tapproval [%s] park %v, expiry %v, on timeout %s, advisors %s, agent answers %s per conversation, %s per day",
		strings.Join(p.Operations, ","), p.Park(), p.Expiry(), p.TimeoutVerdict(), advisors, strconv.FormatUint(p.AgentAnswerBound(), 10),
		strconv.FormatUint(p.AgentAnswerDayBound(), 10))
}
