package host_test

import (
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestConsentOfAnotherPrincipal: a dispatch naming an agent whose payer
// consent names another principal is refused with a receipt carrying
// that consent, nothing reserved, sent or charged; one naming the
// consent's principal is answered.
func TestConsentOfAnotherPrincipal(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, nil)
	mallory := "mallory"
	w.Peer.Principal.Store(&mallory)
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1"))
	peertest.WantExactRefusal(t, res, msg.CodeNoConsent, "the payer's consent names another principal than the agent that made the call; nothing was sent or charged")
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != msg.StateRefused || r.Charge != 0 || r.Consent == nil || r.Agent != "alice" || r.Conversation != "c1" ||
		r.Reason != "refused after the payer's consent, before anything was reserved: the consent names another principal than the dispatch's agent" {
		t.Fatalf("receipt %+v", r)
	}
	if w.App.Calls.Load() != 0 {
		t.Fatal("the application was called")
	}
	if in := peertest.Inspect(t, cl, "a1"); in.State != msg.StateRefused {
		t.Fatalf("inspect: %+v", in)
	}
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "mallory", "c1")))
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindReserveV2] != 1 || n[hostlog.KindRefused] != 1 {
		t.Fatalf("journal: %v", n)
	}
	if rep, err := audit.VerifyStore(w.Store); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 96 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
		// The refused record names the agent, so the reopened store does.
		if v, err := s.AttemptInspect("a1"); err != nil || v.State != msg.StateRefused || v.Agent != "alice" {
			t.Fatalf("a1 after reopening: %+v %v, want refused by alice", v, err)
		}
	})
}

// TestReceiptsCarryTheAgent: an answer's, a 4xx's and a free request's
// receipts name the dispatch's agent and its conversation (a listing has
// none); a legacy allow-list peer's (uid:N) name theirs.
func TestReceiptsCarryTheAgent(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, nil)
	w.Serve(t)
	cl := w.Dial(t)
	ring := wire.NewKeyring(w.Pub.Ed25519())
	for _, c := range []struct {
		d          msg.Dispatch
		agent, cnv string
	}{
		{hosttest.Calc(t, "a1", "alice", "c7"), "alice", "c7"},
		{hosttest.AgentInvoke(t, "a2", "alice", "c8", "calc.evaluate", `{"expression":"1/0"}`), "alice", "c8"},
		{hosttest.WithAgent(peertest.ListDispatch(t, "a3"), "alice"), "alice", ""},
		{hosttest.Calc(t, "a4", peertest.Agent, "c9"), peertest.Agent, "c9"},
	} {
		if c.d.Agent == peertest.Agent {
			w.Peer.Principal.Store(nil)
		}
		res := peertest.Call(t, cl, c.d)
		r, err := msg.VerifyReceipt(res.Receipt, ring)
		if err != nil {
			t.Fatalf("%s: %v (%+v)", c.d.Attempt, err, res.Refusal)
		}
		if r.Agent != c.agent || r.Conversation != c.cnv {
			t.Fatalf("%s: receipt names agent %q, conversation %q; want %q, %q", c.d.Attempt, r.Agent, r.Conversation, c.agent, c.cnv)
		}
	}
}

// TestResolvedAgentAttempt: the receipt of an operator's resolution names
// the reservation's agent and conversation, and a release gives back the
// agent's daily count (here its one call).
func TestResolvedAgentAttempt(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5, NoApp: true})
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice", CallsPerDay: hosttest.U64(1)}); err != nil {
			t.Fatal(err)
		}
	})
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	hangUp := hangUpApp(t, w.Route.Upstream)
	w.Serve(t)
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, hosttest.Calc(t, "u1", "alice", "c1")); res.Outcome != msg.StateUncertain {
		t.Fatalf("dispatch: %s %s; want uncertain", res.Outcome, res.Detail)
	}
	hangUp()
	w.App = peertest.StartApp(t, w.Dir)
	if res := peertest.Call(t, cl, hosttest.Calc(t, "u2", "alice", "c1")); res.Refusal == nil || res.Refusal.Code != msg.CodeAgentLimit {
		t.Fatalf("the uncertain attempt holds the agent's one call: %+v", res)
	}
	if v := resolveJSON(t, w.Store, "u1", "release", "never reached the application"); v.Agent != "alice" {
		t.Fatalf("attempts resolve shows agent %q", v.Agent)
	}
	in := peertest.Inspect(t, cl, "u1")
	r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != msg.StateReleased || r.Agent != "alice" || r.Conversation != "c1" {
		t.Fatalf("receipt %+v", r)
	}
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "u3", "alice", "c1")))
	// After a restart the release still counts: the one call is u3's.
	w.Stop()
	w.Serve(t)
	cl = w.Dial(t)
	if res := peertest.Call(t, cl, hosttest.Calc(t, "u4", "alice", "c1")); res.Refusal == nil || res.Refusal.Code != msg.CodeAgentLimit {
		t.Fatalf("after restart: %+v", res)
	}
}

// TestNotSentGivesBackAgentCount: a call that is not sent (the
// application unreachable) gives back the agent's count and credits, its
// receipt naming the agent; the count stays given back after a restart.
func TestNotSentGivesBackAgentCount(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 3, NoApp: true}, &views.AgentSpec{CallsPerDay: hosttest.U64(1), CreditsPerDay: hosttest.U64(3)})
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"n1", "n2"} {
		res := peertest.Call(t, cl, hosttest.Calc(t, id, "alice", "c1"))
		if res.Outcome != msg.StateNotSent {
			t.Fatalf("%s: %s %+v", id, res.Outcome, res.Refusal)
		}
		r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
		if err != nil || r.Agent != "alice" || r.Conversation != "c1" || r.Charge != 0 {
			t.Fatalf("%s: receipt %+v %v", id, r, err)
		}
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if v, _ := s.AgentShow("ctl", "alice"); v.CallsToday != 0 || v.CreditsToday != 0 || v.ConversationsToday != 0 {
			t.Fatalf("after restart: %+v", v)
		}
	})
}
