package host_test

import (
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// noAgent is the refusal of a dispatch that names no principal.
const noAgent = "the dispatch names no agent: every call must name its principal (an agent's name, uid:N or foreground), so the operator's limits apply to it; nothing was reserved or sent"

// TestDispatchNamingNoAgent: a dispatch of each kind (an invoke, a
// listing, a describe) that names no agent is refused before anything is
// admitted, with the one line naming why: nothing journaled, reserved,
// consented to, sent or charged, the attempt not seen, and its id still
// free for a dispatch that names its agent. The default record's limits
// (here, one call a day) would otherwise be passed by leaving the name out.
func TestDispatchNamingNoAgent(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4},
		&views.AgentSpec{Agent: msg.DefaultAgent, CallsPerDay: hosttest.U64(1)})
	w.Serve(t)
	cl := w.Dial(t)
	for _, d := range []msg.Dispatch{
		hosttest.Calc(t, "n1", "", "c1"),
		hosttest.WithAgent(peertest.ListDispatch(t, "n2"), ""),
		hosttest.WithAgent(peertest.DescribeDispatch(t, "n3", "calc.evaluate"), ""),
	} {
		peertest.WantExactRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, noAgent)
		refusedUnseen(t, w, cl, d.Attempt, 0, 0)
	}
	// The id was never taken: alice (under the default) may use it.
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "n1", "alice", "c1")))
	// An allowance naming no agent is refused as well; one of a name
	// without a record answers the default's.
	if typ, _, ref := agentAllowance(t, cl, ""); typ != msg.TypeRefused || ref.Code != msg.CodeBadRequest ||
		ref.Reason != `allowance: agent "" is none of a configured agent's name, foreground and uid:N` {
		t.Fatalf("an allowance naming no agent: %s %+v", typ, ref)
	}
	if _, res, _ := agentAllowance(t, cl, "alice"); !res.Limited || res.CallsLeft == nil || *res.CallsLeft != 0 {
		t.Fatalf("alice's allowance under the default: %+v", res)
	}
	w.Stop()
	n := hosttest.Kinds(t, w.Store)
	if n[hostlog.KindReserveV2] != 1 || n[hostlog.KindRefused] != 0 || n[hostlog.KindAsk] != 0 {
		t.Fatalf("journal: %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 96 || p.Holds != 0 {
			t.Fatalf("purse %+v: only alice's call is charged", p)
		}
	})
}

// TestDefaultRecord: an agent with no limits record of its own meets its
// controller's default record ("*"): its approval mark raises an ask,
// its calls per day (2) count the ask and one call, and the one past
// them is refused with the exact error, nothing consented, sent or
// charged. Another agent under the default counts a day of its own; an
// agent with a record of its own is held to that alone. The default is journaled and replayed:
// after a restart show, list and the allowance name it, and the count
// still holds.
func TestDefaultRecord(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, &views.AgentSpec{Agent: msg.DefaultAgent,
		CallsPerDay: hosttest.U64(2), Approval: &msg.ApprovalPolicy{Operations: []string{"app/text.*"}}})
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice"}); err != nil {
			t.Fatal(err)
		}
	})
	carol, dave := "carol", "dave"
	w.Peer.Principal.Store(&carol)
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.AgentInvoke(t, "k1", "carol", "c1", "text.sha256", `{"text":"x"}`)))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "k2", "carol", "c1")))
	want := "the daily call limit for this agent is reached: it refills at " + nextUTCDay(utcDay(clk.Now()))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "k3", "carol", "c1")), msg.CodeAgentLimit, want)
	refusedUnseen(t, w, cl, "k3", 1, 1)
	w.Peer.Principal.Store(&dave)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "d1", "dave", "c1")))
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.AgentInvoke(t, "a1", "alice", "c1", "text.sha256", `{"text":"x"}`)))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindReserveV2] != 4 || n[hostlog.KindAsk] != 1 || n[hostlog.KindRefused] != 0 {
		t.Fatalf("journal: %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 84 || p.Holds != 0 {
			t.Fatalf("purse %+v: the refused call is charged", p)
		}
		v, err := s.AgentShow("ctl", "carol")
		if err != nil || v.Record != msg.DefaultAgent || v.Agent != "carol" || v.CallsToday != 2 || v.CallsPerDay == nil || *v.CallsPerDay != 2 {
			t.Fatalf("carol after the restart: %+v %v", v, err)
		}
		if v, err := s.AgentShow("ctl", msg.DefaultAgent); err != nil || v.Record != "" || v.Approval == nil {
			t.Fatalf("the default after the restart: %+v %v", v, err)
		}
		if vs := s.Agents(); len(vs) != 2 || vs[0].Agent != msg.DefaultAgent || vs[1].Agent != "alice" {
			t.Fatalf("list %+v", vs)
		}
		if a := s.Allowance("ctl", "carol"); !a.Limited || a.CallsLeft == nil || *a.CallsLeft != 0 {
			t.Fatalf("carol's allowance %+v", a)
		}
	})
	w.Serve(t)
	cl = w.Dial(t)
	w.Peer.Principal.Store(&carol)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "k4", "carol", "c1")), msg.CodeAgentLimit, want)
}

// TestNoDefaultRecord: a store without a default record (every store
// from before it) limits an agent without a record of its own by its
// grants and the payer alone, as before, and says so when shown.
func TestNoDefaultRecord(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, nil)
	w.Peer.Principal.Store(nil)
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"u1", "u2", "u3"} {
		hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, id, peertest.Agent, "c1")))
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		_, err := s.AgentShow("ctl", peertest.Agent)
		if want := "refused: agent uid:1000 of controller ctl has no limits record and its controller no default one (agent set '*'): only its grants and the payer limit it"; err == nil || err.Error() != want {
			t.Fatalf("show: %v, want %q", err, want)
		}
	})
}

// TestDefaultRecordAdvisors: the default record's approval policy names
// the advisors of an agent without a record of its own: rev lists carol's
// ask and its approve is taken; an advisor the default does not name is
// refused, naming why.
func TestDefaultRecordAdvisors(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, &views.AgentSpec{Agent: msg.DefaultAgent,
		Approval: hosttest.WithAdvisors(nil, "rev")})
	carol := "carol"
	w.Peer.Principal.Store(&carol)
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "k1", "carol", "c1")))
	s := w.HostStore()
	asks, err := s.AdvisorAsks("ctl", "rev")
	if err != nil || len(asks) != 1 || asks[0].ID != tk.ID || asks[0].Agent != "carol" {
		t.Fatalf("rev's asks: %+v %v", asks, err)
	}
	if res := s.Advise("ctl", hosttest.Advise(tk.ID, "eve", msg.VerdictApprove)); res.Refused == nil || res.Refused.Reason != "agent eve is not an advisor of agent carol's asks" {
		t.Fatalf("eve's answer: %+v", res.Refused)
	}
	if res := s.Advise("ctl", hosttest.Advise(tk.ID, "rev", msg.VerdictApprove)); res.Refused != nil || res.Ask.State != msg.AskApproved {
		t.Fatalf("rev's answer: %+v %+v", res.Ask, res.Refused)
	}
	hosttest.WantAnswer(t, hosttest.CollectCall(t, cl, "k1"))
}
