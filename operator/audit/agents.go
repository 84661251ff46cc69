package audit

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// AgentReport is one agent's receipts in a verified chain: how many, and
// what they charged. Agent "" gathers the receipts that name no agent
// (their dispatches came from controllers before agents).
type AgentReport struct {
	Agent    string `json:"agent"`
	Receipts int    `json:"receipts"`
	Charged  uint64 `json:"charged"`
}

// agentReports groups the receipts rs (in chain order) by agent, and
// checks that each receipt naming an agent carries a payer consent whose
// principal is that agent, where dispatchOf gives its controller's
// dispatch key (nil: the consents are not checked), and that none names no
// agent after its controller named one (principals.go).
func agentReports(rs []chainReceipt, dispatchOf func(controller string) *wire.Keyring) ([]AgentReport, []string) {
	var reps []AgentReport
	var findings []string
	for _, c := range rs {
		var f string
		if reps, f = agentCount(reps, c, dispatchOf(c.r.Controller)); f != "" {
			findings = append(findings, f)
		}
	}
	return reps, append(findings, principalFindings(rs)...)
}

// agentCount counts receipt c, the next in chain order, into its agent's
// report (reps are in the order of each agent's first receipt), and
// returns the finding of a receipt naming an agent whose payer consent,
// under ring (nil: not checked), names another principal. A refusal is
// exempt: a consent of another principal is what it refused, charging
// nothing.
func agentCount(reps []AgentReport, c chainReceipt, ring *wire.Keyring) ([]AgentReport, string) {
	i := slices.IndexFunc(reps, func(r AgentReport) bool { return r.Agent == c.r.Agent })
	if i < 0 {
		i = len(reps)
		reps = append(reps, AgentReport{Agent: c.r.Agent})
	}
	reps[i].Receipts++
	reps[i].Charged += c.r.Charge
	if c.r.Agent == "" || c.r.Consent == nil || c.r.Outcome == msg.StateRefused || ring == nil {
		return reps, ""
	}
	// The consent's signature and claim are checked with the
	// reservation's (or the file's consents); here only its principal.
	if cons, err := msg.OpenConsent(c.r.Consent, ring); err == nil && cons.Principal != c.r.Agent {
		return reps, fmt.Sprintf("receipt %d (%s): names agent %s, but its payer consent names principal %s",
			c.r.Seq, c.where, shortField(c.r.Agent), shortField(cons.Principal))
	}
	return reps, ""
}

// chainOrder is a copy of rs sorted by receipt Seq (verifyChain sorts the
// audit's own slice in place; a copy keeps this independent of that).
func chainOrder(rs []chainReceipt) []chainReceipt {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b chainReceipt) int { return cmp.Compare(a.r.Seq, b.r.Seq) })
	return out
}
