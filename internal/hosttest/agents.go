package hosttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Agents and approvals as tests drive them: agent alice of ctl, her
// limits, her calls, and the asks a marked call raises.

// U64 is a pointer to n, for the optional counts of an AgentSpec.
func U64(n uint64) *uint64 { return &n }

// AgentWorld is a World whose host clock is clk, with limits set for
// agent alice of ctl (when spec names her) before the host starts; the
// peer's consents name alice.
func AgentWorld(t *testing.T, o Opts, spec *views.AgentSpec) (*World, *peertest.Clock) {
	t.Helper()
	w := NewWorld(t, o)
	clk := peertest.NewClock(time.Now())
	w.Now = clk.Now
	if spec != nil {
		spec.Controller = "ctl"
		if spec.Agent == "" {
			spec.Agent = "alice"
		}
		w.WithStore(t, func(s *operator.Store) {
			if _, err := s.SetAgentLimits(*spec); err != nil {
				t.Fatal(err)
			}
		})
	}
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	return w, clk
}

// ApprovalWorld is an AgentWorld with a purse of 100, a price of 4 and
// alice's calls marked by pol (app/calc.* when it names no operation).
func ApprovalWorld(t *testing.T, pol *msg.ApprovalPolicy) (*World, *peertest.Clock) {
	t.Helper()
	if len(pol.Operations) == 0 {
		pol.Operations = []string{"app/calc.*"}
	}
	w, clk := AgentWorld(t, Opts{Fund: 100, Price: 4}, &views.AgentSpec{Approval: pol})
	// Ahead of the setup's records, which the store's clock never goes behind.
	clk.Add(time.Minute)
	return w, clk
}

// AgentInvoke is the dispatch of agent's invoke of op with args in
// conversation conv.
func AgentInvoke(t testing.TB, attempt, agent, conv, op, args string) msg.Dispatch {
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(args), ConversationID: conv, OperationID: op, RequestID: "r-" + attempt})
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path, Body: req.Body, Agent: agent}
}

// Calc is agent's calc.evaluate of 1+1 in conversation conv.
func Calc(t testing.TB, attempt, agent, conv string) msg.Dispatch {
	return AgentInvoke(t, attempt, agent, conv, "calc.evaluate", `{"expression":"1+1"}`)
}

// WithAgent is d naming agent.
func WithAgent(d msg.Dispatch, agent string) msg.Dispatch {
	d.Agent = agent
	return d
}

// WantAnswer fails unless res is the application's 200.
func WantAnswer(t testing.TB, res msg.DispatchResult) {
	t.Helper()
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("want an answer, got %s %d %s (%+v)", res.Outcome, res.Status, res.Body, res.Refusal)
	}
}

// VerifiedReceipt is the receipt signed, verified under the world's host key.
func VerifiedReceipt(t testing.TB, w *World, signed []byte) msg.Receipt {
	t.Helper()
	r, err := msg.VerifyReceipt(signed, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	return r
}

// CollectCall collects attempt on cl, with a deadline an hour away.
func CollectCall(t testing.TB, cl *wire.Client, attempt string) msg.DispatchResult {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeCollect, msg.Collect{Attempt: attempt, Deadline: time.Now().Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatalf("collect %s: %v", attempt, err)
	}
	var res msg.DispatchResult
	if err := env.Decode(&res); err != nil {
		t.Fatalf("collect %s: %s: %v", attempt, env.T, err)
	}
	return res
}

// WantAwaiting fails unless res awaits approval with a ticket, which it
// returns.
func WantAwaiting(t testing.TB, res msg.DispatchResult) *msg.AskTicket {
	t.Helper()
	if res.Outcome != msg.StateAwaitingApproval || res.Ask == nil || !strings.HasPrefix(res.Ask.ID, "ask-") || len(res.Ask.ID) != 16 {
		t.Fatalf("want awaiting approval with a ticket, got %s %+v (%+v)", res.Outcome, res.Ask, res.Refusal)
	}
	return res.Ask
}

// WantPush waits for the verdict the host pushes to p, and fails unless
// it is state of ask id of attempt.
func WantPush(t testing.TB, p *peertest.Peer, attempt, id string, state msg.AskState) {
	t.Helper()
	select {
	case v := <-p.Verdicts:
		if v.Attempt != attempt || v.Ask != id || v.State != state {
			t.Fatalf("push %+v, want %s %s %s", v, attempt, id, state)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no verdict pushed on the reverse socket")
	}
}

// WithAdvisors marks app/calc.* with advisors allowed, bound the agent
// answers (nil: the default).
func WithAdvisors(bound *uint64, advisors ...string) *msg.ApprovalPolicy {
	return &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}, Advisors: advisors, AgentAnswers: bound}
}

// HumansOnly marks app/calc.* for humans alone.
func HumansOnly() *msg.ApprovalPolicy {
	return &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}}
}

// Human is a human's answer v, by uid with its account name.
func Human(v msg.Verdict, uid int, account string) views.Answer {
	return views.Answer{Verdict: v, By: fmt.Sprintf("uid:%d", uid), Account: account}
}

// Advise is advisor's verdict v on ask id, with a sentence.
func Advise(id, advisor string, v msg.Verdict) msg.Advise {
	return msg.Advise{Advisor: advisor, Ask: id, Verdict: v, Sentence: "looks fine to me"}
}

// RaiseAsks marks app/calc.* of agents alice (rev may advise her) and bob
// (humans only), serves the host on a clock of its own (w.Now, set here:
// it must be nil) and raises one ask of each through a real dispatch,
// alice's a millisecond before bob's (lists are oldest first), in
// conversations conv-1 and conv-2. It returns their ids; the host goes on
// serving. Set what else the host needs (w.Approvals) before.
func RaiseAsks(t *testing.T, w *World) (alice, bob string) {
	t.Helper()
	if w.Now != nil {
		t.Fatal("RaiseAsks sets the host's clock: the world must have none")
	}
	w.WithStore(t, func(s *operator.Store) {
		for agent, pol := range map[string]*msg.ApprovalPolicy{"alice": WithAdvisors(nil, "rev"), "bob": HumansOnly()} {
			if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: agent, Approval: pol}); err != nil {
				t.Fatal(err)
			}
		}
	})
	clk := peertest.NewClock(time.Now().Add(time.Minute))
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)
	alice = WantAwaiting(t, peertest.Call(t, cl, Calc(t, "at-alice", "alice", "conv-1"))).ID
	clk.Add(time.Millisecond)
	bob = WantAwaiting(t, peertest.Call(t, cl, Calc(t, "at-bob", "bob", "conv-2"))).ID
	return alice, bob
}
