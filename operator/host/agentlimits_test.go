package host_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// refusedUnseen checks a refusal at admission left no trace: the
// application was not called, no consent was asked, the attempt is not-seen.
func refusedUnseen(t *testing.T, w *hosttest.World, cl *wire.Client, id string, apps, reserves int64) {
	t.Helper()
	if got := w.App.Calls.Load(); got != apps {
		t.Fatalf("the application was called %d times, want %d", got, apps)
	}
	if got := w.Peer.Reserves.Load(); got != reserves {
		t.Fatalf("%d consents asked, want %d", got, reserves)
	}
	if in := peertest.Inspect(t, cl, id); in.State != msg.StateNotSeen {
		t.Fatalf("inspect %s: %+v", id, in)
	}
}

// TestAgentCallsPerDay: at the daily call limit N the call N+1 is refused
// with the limit and its refill, nothing journaled, consented, delivered
// or charged; another agent without a record (and no default record) is
// limited by the grant alone; a restart refills nothing (counted from the journal).
func TestAgentCallsPerDay(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 2}, &views.AgentSpec{CallsPerDay: hosttest.U64(2)})
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c2")))
	refill := nextUTCDay(utcDay(clk.Now()))
	want := "the daily call limit for this agent is reached: it refills at " + refill
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a3", "alice", "c1")), msg.CodeAgentLimit, want)
	refusedUnseen(t, w, cl, "a3", 2, 2)
	// A free describe counts as a call too.
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.WithAgent(peertest.DescribeDispatch(t, "a4", "calc.evaluate"), "alice")), msg.CodeAgentLimit, want)
	w.Peer.Principal.Store(nil)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "b1", peertest.Agent, "c1")))
	bob := "bob"
	w.Peer.Principal.Store(&bob)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "b2", "bob", "c1")))
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindReserveV2] != 4 || n[hostlog.KindRefused] != 0 {
		t.Fatalf("journal: %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 92 {
			t.Fatalf("purse %+v: only the four admitted calls are charged", p)
		}
		if v, _ := s.AgentShow("ctl", "alice"); v.CallsToday != 2 || v.CreditsToday != 4 || v.ConversationsToday != 2 {
			t.Fatalf("alice after restart: %+v", v)
		}
	})
	w.Serve(t)
	cl = w.Dial(t)
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a5", "alice", "c1")), msg.CodeAgentLimit, want)
}

// TestAgentCreditsPerDay: the reservation's charge counts against the
// agent's daily credits; at N a call that would pass it is refused, a
// free one still passes.
func TestAgentCreditsPerDay(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 3}, &views.AgentSpec{CreditsPerDay: hosttest.U64(6)})
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a3", "alice", "c1")), msg.CodeAgentLimit,
		"the daily credit limit for this agent is reached: it refills at "+nextUTCDay(utcDay(clk.Now())))
	refusedUnseen(t, w, cl, "a3", 2, 2)
	if res := peertest.Call(t, cl, hosttest.WithAgent(peertest.DescribeDispatch(t, "a4", "calc.evaluate"), "alice")); res.Outcome != msg.StateDefinite {
		t.Fatalf("a free describe: %+v", res)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 94 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestAgentConversationBudget: credits per conversation are counted per
// conversationId; another conversation has its own; a new conversation
// past the day's bound is refused, a known one still passes.
func TestAgentConversationBudget(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 3}, &views.AgentSpec{CreditsPerConversation: hosttest.U64(6), ConversationsPerDay: 2})
	w.Serve(t)
	cl := w.Dial(t)
	refill := nextUTCDay(utcDay(clk.Now()))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a3", "alice", "c1")), msg.CodeAgentLimit,
		"the credit limit of this conversation for this agent is reached: it refills at "+refill)
	refusedUnseen(t, w, cl, "a3", 2, 2)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a4", "alice", "c2")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a5", "alice", "c3")), msg.CodeAgentLimit,
		"the daily limit of conversations for this agent is reached: a new conversation can start at "+refill)
	refusedUnseen(t, w, cl, "a5", 3, 3)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a6", "alice", "c2")))
	// After a restart the conversations are counted from the journal.
	w.Stop()
	w.Serve(t)
	cl = w.Dial(t)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a7", "alice", "c3")), msg.CodeAgentLimit,
		"the daily limit of conversations for this agent is reached: a new conversation can start at "+refill)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a8", "alice", "c1")), msg.CodeAgentLimit,
		"the credit limit of this conversation for this agent is reached: it refills at "+refill)
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindReserveV2] != 4 || n[hostlog.KindRefused] != 0 {
		t.Fatalf("journal: %v", n)
	}
}

// TestAgentOperations: an operation outside the agent's patterns is
// refused naming the limit, though the grant covers it.
func TestAgentOperations(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 1}, &views.AgentSpec{Operations: []string{"app/calc.*"}})
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.AgentInvoke(t, "a2", "alice", "c1", "units.convert", `{"value":1,"from":"m","to":"cm"}`)), msg.CodeAgentLimit,
		"the operator's limits for this agent do not allow operation units.convert of application app: calls resume once the operator allows it")
	refusedUnseen(t, w, cl, "a2", 1, 1)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.WithAgent(peertest.DescribeDispatch(t, "a3", "text.sha256"), "alice")), msg.CodeAgentLimit,
		"the operator's limits for this agent do not allow operation text.sha256 of application app: calls resume once the operator allows it")
}

// TestAgentRate: a burst of B calls passes at once, call B+1 is refused
// until the rate refills one call; the refusal names when.
func TestAgentRate(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 1}, &views.AgentSpec{RatePerMinute: hosttest.U64(60), Burst: 2})
	clk.Set(time.UnixMilli((clk.Now().UnixMilli()/1000 + 2) * 1000)) // on a second, after every time recorded
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	at := clk.Now().Add(time.Second).UTC().Format(time.RFC3339)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a3", "alice", "c1")), msg.CodeAgentLimit, "the rate limit for this agent is reached: it refills at "+at)
	refusedUnseen(t, w, cl, "a3", 2, 2)
	clk.Add(999 * time.Millisecond)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a4", "alice", "c1")), msg.CodeAgentLimit, "the rate limit for this agent is reached: it refills at "+at)
	clk.Add(time.Millisecond)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a5", "alice", "c1")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a6", "alice", "c1")), msg.CodeAgentLimit,
		"the rate limit for this agent is reached: it refills at "+clk.Now().Add(time.Second).UTC().Format(time.RFC3339))
}

// TestAgentHoldAndLastMoment: a call waiting for the payer's consent
// holds its count (a second call past the limit is refused meanwhile),
// and limits replaced during the wait stop it at the last moment, with a
// receipted refusal and nothing charged.
func TestAgentHoldAndLastMoment(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 2}, &views.AgentSpec{CallsPerDay: hosttest.U64(1)})
	entered, release := make(chan struct{}), make(chan struct{})
	hook := func() { close(entered); <-release }
	w.Peer.BeforeConsent.Store(&hook)
	w.Serve(t)
	cl := w.Dial(t)
	first := make(chan msg.DispatchResult, 1)
	go func() { first <- peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")) }()
	<-entered
	w.Peer.BeforeConsent.Store(nil)
	refill := nextUTCDay(utcDay(clk.Now()))
	want := "the daily call limit for this agent is reached: it refills at " + refill
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")), msg.CodeAgentLimit, want)
	if code, _, errs := hosttest.RunCLI("agent", "set", "alice", "--controller", "ctl", "--calls-per-day", "0", "--store", w.Store); code != 0 {
		t.Fatal(errs)
	}
	close(release)
	res := <-first
	// operator's stoppedBeforeSending, the end of a refusal at the last moment.
	const stoppedBeforeSending = "; the call was admitted, then stopped before it was sent: nothing was sent or charged"
	peertest.WantExactRefusal(t, res, msg.CodeAgentLimit, want+stoppedBeforeSending)
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != msg.StateRefused || r.Charge != 0 || r.Agent != "alice" || r.Conversation != "c1" ||
		r.Reason != "refused after the payer's consent, before anything was sent: "+want+stoppedBeforeSending {
		t.Fatalf("receipt %+v", r)
	}
	if w.App.Calls.Load() != 0 {
		t.Fatal("the application was called")
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindReserveV2] != 0 || n[hostlog.KindRefused] != 1 {
		t.Fatalf("journal: %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 100 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestAgentDefaultConversations: limits that do not bound conversations
// count msg.DefaultConversationsPerDay of them; the next new one is
// refused. A dispatch whose agent is no principal's name is malformed.
func TestAgentDefaultConversations(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100}, &views.AgentSpec{CallsPerDay: hosttest.U64(1000)})
	w.Serve(t)
	cl := w.Dial(t)
	for i := range msg.DefaultConversationsPerDay {
		hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, fmt.Sprintf("a%d", i), "alice", fmt.Sprintf("c%d", i))))
	}
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "past", "alice", "c-new")), msg.CodeAgentLimit,
		"the daily limit of conversations for this agent is reached: a new conversation can start at "+nextUTCDay(utcDay(clk.Now())))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "known", "alice", "c0")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "bad", "Alice", "c0")), msg.CodeBadRequest,
		`agent "Alice" is none of a configured agent's name, foreground and uid:N`)
	w.Peer.Principal.Store(nil)
	for _, ok := range []string{"foreground", "uid:1000"} {
		pr := ok
		w.Peer.Principal.Store(&pr)
		hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "p-"+strings.ReplaceAll(ok, ":", ""), ok, "c0")))
	}
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "bad2", "uid:01", "c0")), msg.CodeBadRequest,
		`agent "uid:01" is none of a configured agent's name, foreground and uid:N`)
}

// BenchmarkHostCallAgent is BenchmarkHostCall's one dispatcher with the
// dispatch naming an agent that has every limit set (none reached): what
// the agent's checks and counts add to a call.
func BenchmarkHostCallAgent(b *testing.B) {
	w := hosttest.NewWorld(b, hosttest.Opts{Fund: 1 << 40, Price: 1, PerDay: 1 << 40})
	w.WithStore(b, func(s *operator.Store) {
		big := hosttest.U64(1 << 40)
		// The rate and burst are the bounds a limits record may carry
		// (operator's maxAgentRate, 1_000_000 calls a minute, and
		// maxAgentBurst, 10_000 calls at once).
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice", Operations: []string{"app/calc.*"}, CallsPerDay: big,
			CreditsPerDay: big, CreditsPerConversation: big, RatePerMinute: hosttest.U64(1_000_000), Burst: 10_000}); err != nil {
			b.Fatal(err)
		}
	})
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	w.Serve(b)
	cl := w.Dial(b)
	run := benchRun.Add(1)
	runDispatchers(b, 1, func(i int64) error {
		return benchInvoke(b, cl, fmt.Sprintf("g%d-%d", run, i), "alice")
	})
}

// TestAgentCreditsCountWhatWasCharged: an application's refusal settled at
// the grant's refusal price (0 here) gives the rest of its reservation back
// to the agent's daily credits, as to the purse, and still counts as a
// call; so does its replay after a restart (the outcome record settles
// it). With credits for two answers, a 4xx and an answer, then after a
// restart one more answer, pass, and the next is refused.
func TestAgentCreditsCountWhatWasCharged(t *testing.T) {
	w, clk := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 3}, &views.AgentSpec{CreditsPerDay: hosttest.U64(6), CallsPerDay: hosttest.U64(4)})
	w.Serve(t)
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, hosttest.AgentInvoke(t, "a1", "alice", "c1", "calc.evaluate", `{"expression":"1/0"}`)); res.Outcome != msg.StateDefinite || res.Status/100 == 2 {
		t.Fatalf("a1, an application refusal: %+v", res)
	}
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	w.Stop()
	w.Serve(t)
	cl = w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a3", "alice", "c1")))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a4", "alice", "c1")), msg.CodeAgentLimit,
		"the daily credit limit for this agent is reached: it refills at "+nextUTCDay(utcDay(clk.Now())))
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 94 {
			t.Fatalf("purse %+v: want two answers charged", p)
		}
	})
}
