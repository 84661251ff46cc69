package host_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestAskCountsOneCall: at calls per day 1, a marked call's ask counts the
// day's one call; a second marked call is refused naming the limit, with
// nothing journaled; the approved ask's call is still delivered (its
// reservation counts no second call), once; after a restart the day's
// count is still the one call.
func TestAskCountsOneCall(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4},
		&views.AgentSpec{CallsPerDay: hosttest.U64(1), Approval: hosttest.HumansOnly()})
	clk.Add(time.Minute)
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	refill := time.UnixMilli((clk.Now().UnixMilli()/86_400_000 + 1) * 86_400_000).UTC().Format(time.RFC3339)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c2")), msg.CodeAgentLimit,
		"the daily call limit for this agent is reached: it refills at "+refill)
	if v, _ := w.HostStore().AgentShow("ctl", "alice"); v.CallsToday != 1 || v.CreditsToday != 0 {
		t.Fatalf("agent counts %+v, want the ask's one call", v)
	}
	if _, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "ann")); err != nil {
		t.Fatal(err)
	}
	hosttest.WantPush(t, w.Peer, "a1", tk.ID, msg.AskApproved)
	hosttest.WantAnswer(t, hosttest.CollectCall(t, cl, "a1"))
	if w.App.Calls.Load() != 1 || w.Peer.Reserves.Load() != 1 {
		t.Fatalf("delivered %d times, %d consents", w.App.Calls.Load(), w.Peer.Reserves.Load())
	}
	if v, _ := w.HostStore().AgentShow("ctl", "alice"); v.CallsToday != 1 || v.CreditsToday != 4 {
		t.Fatalf("agent counts %+v, want one call of 4 credits", v)
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAsk] != 1 || n[hostlog.KindReserveV2] != 1 {
		t.Fatalf("journal %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if v, _ := s.AgentShow("ctl", "alice"); v.CallsToday != 1 || v.CreditsToday != 4 {
			t.Fatalf("after a restart %+v", v)
		}
	})
}

// TestAskPendingCapsOnTheHost: the caps the operator gives serve hold on
// the forward socket: one past each is refused with its exact line,
// nothing journaled, reserved or consented, and the attempt id is not
// taken (inspect: not seen).
func TestAskPendingCapsOnTheHost(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, &views.AgentSpec{Approval: hosttest.HumansOnly()})
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "bob", Approval: hosttest.HumansOnly()}); err != nil {
			t.Fatal(err)
		}
	})
	clk.Add(time.Minute)
	body := len(hosttest.Calc(t, "a1", "alice", "c1").Body)
	w.AskBounds = views.AskBounds{PerAgent: 2, PerController: 3, BytesPerController: int64(4*body - 1)}
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"a1", "a2"} {
		hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, id, "alice", "c1")))
	}
	tail := ": a call needing approval is refused until one is answered or expires; nothing was journaled, reserved or sent"
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a3", "alice", "c1")), msg.CodeAgentLimit,
		"2 asks of agent alice are pending, the bound of pending asks per agent"+tail)
	hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "b1", "bob", "c1")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "b2", "bob", "c1")), msg.CodeAgentLimit,
		"3 asks of this controller's agents are pending, the bound of pending asks per controller"+tail)
	if in := peertest.Inspect(t, cl, "a3"); in.State != msg.StateNotSeen {
		t.Fatalf("the refused ask's attempt: %+v", in)
	}
	w.Stop()
	w.AskBounds = views.AskBounds{PerAgent: 16, PerController: 16, BytesPerController: int64(4*body - 1)}
	w.Serve(t)
	cl = w.Dial(t)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "b3", "bob", "c1")), msg.CodeAgentLimit,
		fmt.Sprintf("the pending asks of this controller's agents hold %d bytes of calls and this call's %d would pass the bound of %d bytes of pending asks per controller",
			3*body, body, 4*body-1)+tail)
	if w.App.Calls.Load() != 0 || w.Peer.Reserves.Load() != 0 {
		t.Fatal("a refused ask reached the application or asked consent")
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAsk] != 3 || n[hostlog.KindReserveV2] != 0 || n[hostlog.KindRefused] != 0 {
		t.Fatalf("journal %v", n)
	}
}
