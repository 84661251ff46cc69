package host_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// agentAllowance asks the host on cl what agent may still spend today: the
// answer's type, the allowance and the refusal when refused.
func agentAllowance(t *testing.T, cl *wire.Client, agent string) (string, msg.AllowanceResult, *msg.Refusal) {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeAllowance, msg.Allowance{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	var res msg.AllowanceResult
	if env.T == msg.TypeRefused {
		var r msg.Refusal
		env.Decode(&r)
		return env.T, res, &r
	}
	if err := env.Decode(&res); err != nil {
		t.Fatal(err)
	}
	return env.T, res, nil
}

// TestAllowance: the route's channel answers what an agent may still
// spend today under the operator's limits (holds and calls counted), its
// patterns and the next UTC midnight; an agent without limits is not
// limited; a malformed agent name is refused.
func TestAllowance(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, &views.AgentSpec{CallsPerDay: hosttest.U64(3), CreditsPerDay: hosttest.U64(10), Operations: []string{"app/calc.*"}})
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	typ, res, _ := agentAllowance(t, cl, "alice")
	refills := (utcDay(clk.Now()) + 1) * 86_400_000
	if typ != msg.TypeAllowanceResult || !res.Limited || res.Agent != "alice" || *res.CallsLeft != 2 || *res.CreditsLeft != 6 ||
		res.RefillsAt != refills || !slices.Equal(res.Operations, []string{"app/calc.*"}) {
		t.Fatalf("alice: %s %+v", typ, res)
	}
	if _, res, _ := agentAllowance(t, cl, "bob"); res.Limited || res.CallsLeft != nil || res.CreditsLeft != nil || res.RefillsAt != refills {
		t.Fatalf("bob: %+v", res)
	}
	if typ, _, ref := agentAllowance(t, cl, "Bob:x"); typ != msg.TypeRefused || ref.Code != msg.CodeBadRequest ||
		ref.Reason != `allowance: agent "Bob:x" is none of a configured agent's name, foreground and uid:N` {
		t.Fatalf("bad agent: %s %+v", typ, ref)
	}
}

// TestListingFilteredByAgent: a listing by an agent with operation
// patterns shows only what the agent may call (though the grant covers
// all); one whose patterns name no pattern of the application is refused.
func TestListingFilteredByAgent(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100}, &views.AgentSpec{Operations: []string{"app/calc.*", "app/text.*"}})
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "bob", Operations: []string{"other/*"}}); err != nil {
			t.Fatal(err)
		}
	})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, hosttest.WithAgent(peertest.ListDispatch(t, "l1"), "alice"))
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("list: %+v", res)
	}
	var page struct {
		Operations []struct {
			ID string `json:"id"`
		} `json:"operations"`
	}
	json.Unmarshal(res.Body, &page)
	var ids []string
	for _, op := range page.Operations {
		ids = append(ids, op.ID)
	}
	if !slices.Equal(ids, []string{"calc.evaluate", "text.sha256"}) {
		t.Fatalf("alice's listing: %v", ids)
	}
	// Without the agent the grant alone filters: everything.
	res = peertest.Call(t, cl, peertest.ListDispatch(t, "l2"))
	json.Unmarshal(res.Body, &page)
	if len(page.Operations) <= 2 {
		t.Fatalf("unfiltered listing: %s", res.Body)
	}
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.WithAgent(peertest.ListDispatch(t, "l3"), "bob")), msg.CodeAgentLimit,
		"the operator's limits for this agent do not allow application app: calls resume once the operator allows it")
}
