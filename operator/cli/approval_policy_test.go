package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestAgentSetApprovalBounds: every bound of the approval policy `agent
// set` signs, one past it, is refused with its one line and exit 2, and
// nothing is recorded; at the bounds it is accepted.
func TestAgentSetApprovalBounds(t *testing.T) {
	store := agentStore(t)
	repeat := func(flag, format string, n int) []string {
		var a []string
		for i := range n {
			a = append(a, "--"+flag, fmt.Sprintf(format, i))
		}
		return a
	}
	marked := []string{"--approve-ops", "app/pay"}
	with := func(args ...string) []string { return append(append([]string{}, marked...), args...) }
	for _, c := range []struct {
		args []string
		want string
	}{
		{repeat("approve-ops", "app/op%d", 65), `refused: agent alice: 65 approval patterns, the bound is 64`},
		{[]string{"--approve-ops", "calc.add"}, `refused: agent alice: approval pattern "calc.add": must be APPLICATION/OPERATION, at most 160 bytes`},
		{[]string{"--approve-ops", "app/" + strings.Repeat("o", 157)},
			`refused: agent alice: approval pattern "app/` + strings.Repeat("o", 76) + `...": must be APPLICATION/OPERATION, at most 160 bytes`},
		{[]string{"--approve-ops", "app/a/b"}, `refused: agent alice: approval pattern "app/a/b": must be APPLICATION/OPERATION, at most 160 bytes`},
		{[]string{"--approve-ops", "app/[x"}, `refused: agent alice: approval pattern "app/[x": syntax error in pattern`},
		{with("--park", "999ms"), `refused: agent alice: a park of 999ms: must be 1s to 5m0s`},
		{with("--park", "5m0.001s"), `refused: agent alice: a park of 5m0.001s: must be 1s to 5m0s`},
		{with("--ask-expiry", "59.999s"), `refused: agent alice: an ask expiry of 59.999s: must be 1m0s to 720h0m0s`},
		{with("--ask-expiry", "720h0m0.001s"), `refused: agent alice: an ask expiry of 720h0m0.001s: must be 1m0s to 720h0m0s`},
		{with("--park", "1m0.001s", "--ask-expiry", "1m"), `refused: agent alice: a park of 1m0.001s is longer than the ask expiry of 1m0s`},
		{with("--park", "31s", "--ask-expiry", "1m", "--park", "61s"), `refused: agent alice: a park of 1m1s is longer than the ask expiry of 1m0s`},
		{with("--on-timeout", "wait"), `refused: agent alice: on-timeout verdict "wait": must be approve or deny`},
		{with(repeat("advisor", "rev%d", 17)...), `refused: agent alice: 17 advisors, the bound is 16`},
		{with("--advisor", "Rev"), `refused: agent alice: advisor: agent name "Rev": must be 1 to 32 of a-z0-9_-, first a letter`},
		{with("--advisor", "foreground"), `refused: agent alice: advisor: agent name "foreground" is reserved for the foreground socket`},
		{with("--advisor", "alice"), `refused: agent alice: an agent is never its own advisor (an advisor never answers an ask raised by its own identity)`},
		{with("--advisor", "rev,rev"), `refused: agent alice: advisor rev is named twice`},
		{with("--advisor", "rev", "--agent-answers", "1001"), `refused: agent alice: 1001 agent answers per conversation, the bound is 1000`},
		{with("--advisor", "rev", "--agent-answers-per-day", "10001"), `refused: agent alice: 10001 agent answers per day, the bound is 10000`},
		{[]string{"--agent-answers-per-day", "1"}, `usage: --agent-answers-per-day without --approve-ops: it shapes the approval of marked operations, and none is marked`},
		{with("--park", "0s"), `usage: --park 0s: must be a positive whole number of milliseconds`},
		{with("--ask-expiry", "-1h"), `usage: --ask-expiry -1h0m0s: must be a positive whole number of milliseconds`},
		{with("--park", "1.0005s"), `usage: --park 1.0005s: must be a positive whole number of milliseconds`},
		{[]string{"--park", "1m"}, `usage: --park without --approve-ops: it shapes the approval of marked operations, and none is marked`},
		{[]string{"--advisor", "rev"}, `usage: --advisor without --approve-ops: it shapes the approval of marked operations, and none is marked`},
		{[]string{"--agent-answers", "1"}, `usage: --agent-answers without --approve-ops: it shapes the approval of marked operations, and none is marked`},
	} {
		args := append(append([]string{"agent", "set", "alice", "--controller", "ctl"}, c.args...), "--store", store)
		code, _, errs := hosttest.RunCLI(args...)
		if want := "steward-operator agent set: " + c.want + "\n"; code != cli.ExitRefused || errs != want {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, errs, want)
		}
	}
	if _, out, _ := hosttest.RunCLI("agent", "list", "--store", store, "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("a refused set recorded something: %s", out)
	}
	// At the bounds: accepted, and signed as given.
	args := append([]string{"agent", "set", "alice", "--controller", "ctl", "--park", "5m", "--ask-expiry", "720h",
		"--on-timeout", "approve", "--agent-answers", "1000", "--agent-answers-per-day", "10000", "--approve-ops", "app/" + strings.Repeat("o", 156)},
		append(repeat("approve-ops", "app/op%d", 63), repeat("advisor", "rev%d", 16)...)...)
	if code, _, errs := hosttest.RunCLI(append(args, "--store", store)...); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := hosttest.RunCLI("agent", "set", "bob", "--controller", "ctl", "--approve-ops", "app/pay", "--park", "1s", "--ask-expiry", "1m",
		"--store", store); code != 0 {
		t.Fatal(errs)
	}
	s, err := operator.Open(store) // replay checks the policies again
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.AgentShow("ctl", "alice")
	p := v.Approval
	if err != nil || p == nil || len(p.Operations) != 64 || p.ParkMs != 300_000 || p.ExpiryMs != 720*3_600_000 ||
		p.OnTimeout != msg.VerdictApprove || len(p.Advisors) != 16 || p.AgentAnswerBound() != 1000 ||
		p.AgentAnswerDayBound() != 10000 {
		t.Fatalf("alice at the bounds: %+v %v", p, err)
	}
}

// TestAgentShowApproval: agent show prints the policy in force, defaults
// filled in, in text and JSON; an agent without one prints its line as
// before.
func TestAgentShowApproval(t *testing.T) {
	store := agentStore(t)
	for _, args := range [][]string{
		{"agent", "set", "alice", "--controller", "ctl", "--approve-ops", "app/pay,app/refund", "--advisor", "rev", "--store", store},
		{"agent", "set", "carol", "--controller", "ctl", "--approve-ops", "*/*", "--park", "10s", "--ask-expiry", "2h",
			"--on-timeout", "approve", "--agent-answers", "0", "--agent-answers-per-day", "5", "--advisor", "rev", "--store", store},
		{"agent", "set", "bob", "--controller", "ctl", "--store", store},
	} {
		if code, _, errs := hosttest.RunCLI(args...); code != 0 {
			t.Fatal(errs)
		}
	}
	for agent, want := range map[string]string{
		"alice": "\tapproval [app/pay,app/refund] park 30s, expiry 24h0m0s, on timeout deny, advisors rev, agent answers 3 per conversation, 10 per day\n",
		"carol": "\tapproval [*/*] park 10s, expiry 2h0m0s, on timeout approve, advisors rev, agent answers 0 per conversation, 5 per day\n",
		"bob":   "burst 0\n",
	} {
		code, out, errs := hosttest.RunCLI("agent", "show", agent, "--controller", "ctl", "--store", store)
		if code != 0 || !strings.HasSuffix(out, want) {
			t.Errorf("show %s: %d %q %q; want it to end %q", agent, code, out, errs, want)
		}
	}
	_, out, _ := hosttest.RunCLI("agent", "show", "alice", "--controller", "ctl", "--store", store, "--json")
	var v views.AgentView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Approval == nil || !v.Approval.Marks("app", "refund") ||
		v.Approval.Marks("app", "calc") || !v.Approval.MayAdvise("rev") {
		t.Fatalf("show --json: %v %s", err, out)
	}
}
