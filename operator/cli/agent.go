package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// optUint is a uint64 flag that may be absent: not given is nil (not
// limited), unlike 0 (a limit of nothing).
type optUint struct{ v *uint64 }

func (o *optUint) String() string {
	if o == nil || o.v == nil {
		return ""
	}
	return strconv.FormatUint(*o.v, 10)
}

func (o *optUint) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a count of 0 or more", s)
	}
	o.v = &n
	return nil
}

func (c *CLI) cmdAgentSet(args []string) error {
	fs, store := flags("agent set")
	ctrl := fs.String("controller", "", "the controller `C` whose agent this is")
	var ops listFlag
	fs.Var(&ops, "operations", "`APP/OP` pattern the agent may call (path.Match on each side; repeatable or comma-separated; none means all its grants cover)")
	var calls, credits, perConv, rate optUint
	fs.Var(&calls, "calls-per-day", "admitted calls per UTC day (not given: not limited)")
	fs.Var(&credits, "credits-per-day", "credits reserved per UTC day (not given: not limited)")
	fs.Var(&perConv, "credits-per-conversation", "credits per conversationId per UTC day (not given: not limited)")
	convs := fs.Uint64("conversations-per-day", 0, fmt.Sprintf("conversations counted per UTC day (0: %d)", msg.DefaultConversationsPerDay))
	fs.Var(&rate, "rate", "calls per minute (not given: not limited)")
	burst := fs.Uint64("burst", 0, "calls allowed at once under --rate (0: 1)")
	var ap approvalFlags
	ap.define(fs)
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *ctrl == "" {
		return fmt.Errorf("%w: --controller is required", errUsage)
	}
	policy, err := ap.policy(fs)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpAgentSet, Agent: &views.AgentSpec{
		Controller: *ctrl, Agent: pos[0], Operations: ops, CallsPerDay: calls.v, CreditsPerDay: credits.v,
		CreditsPerConversation: perConv.v, ConversationsPerDay: *convs, RatePerMinute: rate.v, Burst: *burst,
		Approval: policy,
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "agent %s of controller %s: revision %d\n", rep.Agent.Agent, rep.Agent.Controller, rep.Agent.Revision)
	return nil
}

func (c *CLI) cmdAgentShow(args []string) error {
	fs, store := flags("agent show")
	ctrl := fs.String("controller", "", "the controller `C` whose agent this is")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *ctrl == "" {
		return fmt.Errorf("%w: --controller is required", errUsage)
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	v, err := s.AgentShow(*ctrl, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(v)
	}
	c.printAgent(v)
	return nil
}

func (c *CLI) cmdAgentList(args []string) error {
	return show(c, "agent list", args, 0, func(s *operator.Store, _ []string) ([]views.AgentView, error) { return s.Agents(), nil },
		func(vs []views.AgentView) {
			for _, v := range vs {
				c.printAgent(v)
			}
		})
}

// printAgent prints one agent's limits on one line: "-" is not limited;
// an agent shown under its controller's default record says so.
func (c *CLI) printAgent(v views.AgentView) {
	ops := strings.Join(v.Operations, ",")
	if ops == "" {
		ops = "*"
	}
	opt := func(p *uint64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatUint(*p, 10)
	}
	agent := v.Agent
	if v.Record != "" {
		agent += " (under the default record " + v.Record + ")"
	}
	fmt.Fprintf(c.Stdout, "%s\t%s\trevision %d [%s]\tcalls %d/%s, credits %d/%s today, per conversation %s, conversations %d/%d, rate %s/min burst %d%s\n",
		v.Controller, agent, v.Revision, ops, v.CallsToday, opt(v.CallsPerDay), v.CreditsToday, opt(v.CreditsPerDay),
		opt(v.CreditsPerConversation), v.ConversationsToday, v.ConversationsPerDay, opt(v.RatePerMinute), v.Burst, approvalText(v.Approval))
}
