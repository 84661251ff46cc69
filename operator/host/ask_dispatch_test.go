package host_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestAskRaisedHoldsNothing: a marked call is admitted, becomes an ask
// (durable before anything answers it) and reserves, holds and delivers
// nothing; its attempt id is taken.
func TestAskRaisedHoldsNothing(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	d := hosttest.Calc(t, "a1", "alice", "c1")
	d.Justification = "the user asked for the sum"
	now := clk.Now().UnixMilli()
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, d))
	if tk.ParkUntil != now+30_000 || tk.ExpiresAt != now+24*3600_000 || tk.OnTimeout != msg.VerdictDeny {
		t.Fatalf("ticket %+v (now %d)", tk, now)
	}
	if w.App.Calls.Load() != 0 || w.Peer.Reserves.Load() != 0 {
		t.Fatal("a marked call reached the application or asked consent")
	}
	if in := peertest.Inspect(t, cl, "a1"); in.State != msg.StateAwaitingApproval {
		t.Fatalf("inspect %+v", in)
	}
	peertest.WantRefusal(t, peertest.Call(t, cl, d), msg.CodeDuplicate, "never delivered twice")
	if p, _ := w.HostStore().PurseShow("ctl"); p.Holds != 0 || p.Balance != 100 {
		t.Fatalf("purse %+v", p)
	}
	if v, _ := w.HostStore().AgentShow("ctl", "alice"); v.CallsToday != 1 || v.CreditsToday != 0 {
		t.Fatalf("agent counts %+v: the ask counts its one call, no credits", v)
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAsk] != 1 || n[hostlog.KindReserveV2] != 0 || n[hostlog.KindRefused] != 0 {
		t.Fatalf("journal %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		v, err := s.AskShow(tk.ID)
		if err != nil || v.State != msg.AskPending || v.Justification != d.Justification || v.Price != 4 ||
			string(v.Arguments) != `{"expression":"1+1"}` || v.Agent != "alice" || v.Conversation != "c1" {
			t.Fatalf("the reopened store's ask %+v %v", v, err)
		}
	})
}

// TestCollectApproved: a collect before the answer parks again with a
// fresh window; the answer is pushed on the reverse socket; the collect
// after it delivers once and charges once, the receipt naming the ask and
// who answered; a second collect is refused.
func TestCollectApproved(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{ParkMs: 5_000})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	clk.Add(3 * time.Second)
	again := hosttest.WantAwaiting(t, hosttest.CollectCall(t, cl, "a1"))
	if again.ID != tk.ID || again.ParkUntil != clk.Now().UnixMilli()+5_000 {
		t.Fatalf("pending again %+v, first %+v", again, tk)
	}
	if _, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "ann")); err != nil {
		t.Fatal(err)
	}
	hosttest.WantPush(t, w.Peer, "a1", tk.ID, msg.AskApproved)
	res := hosttest.CollectCall(t, cl, "a1")
	hosttest.WantAnswer(t, res)
	r := hosttest.VerifiedReceipt(t, w, res.Receipt)
	if r.Ask != tk.ID || r.AnsweredBy != "uid:1001" || r.Charge != 4 || r.Outcome != msg.StateDefinite || r.Agent != "alice" {
		t.Fatalf("receipt %+v", r)
	}
	peertest.WantExactRefusal(t, hosttest.CollectCall(t, cl, "a1"), msg.CodeDuplicate, "attempt a1 is definite, not awaiting approval: it is never delivered twice")
	if w.App.Calls.Load() != 1 || w.Peer.Reserves.Load() != 1 {
		t.Fatalf("delivered %d times, %d consents", w.App.Calls.Load(), w.Peer.Reserves.Load())
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 96 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
		if rep, err := audit.VerifyStore(w.Store); err != nil || len(rep.Findings) != 0 {
			t.Fatalf("verify %+v %v", rep, err)
		}
		if v, _ := s.AttemptInspect("a1"); v.State != msg.StateDefinite {
			t.Fatalf("a1 %+v", v)
		}
	})
}

// TestCollectDenied: a denied ask ends its attempt refused, with a receipt
// charging 0 that names the ask and who denied it; nothing reserved,
// delivered or charged.
func TestCollectDenied(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if _, err := w.HostStore().AnswerAsk(tk.ID, views.Answer{Verdict: msg.VerdictDeny, By: "uid:1001", Note: "too costly"}); err != nil {
		t.Fatal(err)
	}
	hosttest.WantPush(t, w.Peer, "a1", tk.ID, msg.AskDenied)
	res := hosttest.CollectCall(t, cl, "a1")
	peertest.WantExactRefusal(t, res, msg.CodeDenied, "the call's approval was denied (ask "+tk.ID+", by uid:1001): too costly; nothing was reserved, sent or charged")
	r := hosttest.VerifiedReceipt(t, w, res.Receipt)
	if r.Outcome != msg.StateRefused || r.Charge != 0 || r.Reason != "denied by uid:1001: too costly" || r.Ask != tk.ID || r.AnsweredBy != "uid:1001" {
		t.Fatalf("receipt %+v", r)
	}
	// A collect again (a controller killed before it journaled the
	// answer) is told the same denial with the same receipt, journaling
	// nothing: the denial sticks.
	again := hosttest.CollectCall(t, cl, "a1")
	peertest.WantExactRefusal(t, again, msg.CodeDenied, "the call's approval was denied (ask "+tk.ID+", by uid:1001): too costly; nothing was reserved, sent or charged")
	if string(again.Receipt) != string(res.Receipt) {
		t.Fatal("a collect again of the denied attempt carries another receipt")
	}
	if w.App.Calls.Load() != 0 || w.Peer.Reserves.Load() != 0 {
		t.Fatal("a denied call reached the application or asked consent")
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindRefused] != 1 || n[hostlog.KindReserveV2] != 0 {
		t.Fatalf("journal %v: want one refused record and no reservation", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 100 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
		if rep, err := audit.VerifyStore(w.Store); err != nil || len(rep.Findings) != 0 {
			t.Fatalf("verify %+v %v", rep, err)
		}
		if in, _ := s.Inspect("ctl", "a1"); in.State != msg.StateRefused {
			t.Fatalf("a1 after reopening %+v", in)
		}
	})
}

// TestCollectExpired: an unanswered ask collected after its expiry goes
// by its on-timeout verdict as it was when raised: deny refuses with a
// receipt answered by "expiry", approve delivers.
func TestCollectExpired(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{ExpiryMs: 60_000})
	w.Serve(t)
	cl := w.Dial(t)
	td := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if _, err := w.HostStore().SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice",
		Approval: &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}, ExpiryMs: 60_000, OnTimeout: msg.VerdictApprove}}); err != nil {
		t.Fatal(err)
	}
	ta := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	if ta.OnTimeout != msg.VerdictApprove || td.OnTimeout != msg.VerdictDeny {
		t.Fatalf("tickets %+v %+v", td, ta)
	}
	clk.Add(time.Minute)
	res := hosttest.CollectCall(t, cl, "a1")
	peertest.WantExactRefusal(t, res, msg.CodeDenied, "the call's approval expired unanswered (ask "+td.ID+") to its on-timeout verdict deny; nothing was reserved, sent or charged")
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); r.AnsweredBy != "expiry" || r.Charge != 0 ||
		r.Reason != "expired unanswered at "+time.UnixMilli(td.ExpiresAt).UTC().Format(time.RFC3339)+" to deny" {
		t.Fatalf("receipt %+v", r)
	}
	res = hosttest.CollectCall(t, cl, "a2")
	hosttest.WantAnswer(t, res)
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); r.AnsweredBy != "expiry" || r.Ask != ta.ID || r.Charge != 4 {
		t.Fatalf("receipt %+v", r)
	}
	if w.App.Calls.Load() != 1 {
		t.Fatalf("delivered %d", w.App.Calls.Load())
	}
}

// TestApprovedThenRevoked: admission is checked again as it stands at the
// collect: a grant revoked after the approval ends the attempt with a
// receipted refusal, nothing held.
func TestApprovedThenRevoked(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if _, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "")); err != nil {
		t.Fatal(err)
	}
	if err := w.HostStore().RevokeGrant(w.Grant); err != nil {
		t.Fatal(err)
	}
	res := hosttest.CollectCall(t, cl, "a1")
	peertest.WantExactRefusal(t, res, msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application app is revoked: calls resume once the operator issues a new grant"+
		"; the call was approved, then refused when admitted again; nothing was reserved, sent or charged")
	r := hosttest.VerifiedReceipt(t, w, res.Receipt)
	if r.Charge != 0 || r.Ask != tk.ID || r.AnsweredBy != "uid:1001" || !strings.HasPrefix(r.Reason, "refused after approval, when admitted again: the grant") {
		t.Fatalf("receipt %+v", r)
	}
	if p, _ := w.HostStore().PurseShow("ctl"); p.Holds != 0 || p.Balance != 100 {
		t.Fatalf("purse %+v", p)
	}
	if w.App.Calls.Load() != 0 || w.Peer.Reserves.Load() != 0 {
		t.Fatal("delivered")
	}
}

// TestCollectWhileDelivering: a second collect of an attempt whose first
// collect is going on (waiting for the payer's consent) is refused.
func TestCollectWhileDelivering(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	entered, release := make(chan struct{}), make(chan struct{})
	hold := func() { close(entered); <-release }
	w.Peer.BeforeConsent.Store(&hold)
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if _, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "")); err != nil {
		t.Fatal(err)
	}
	first := make(chan msg.DispatchResult, 1)
	go func() { first <- hosttest.CollectCall(t, cl, "a1") }()
	<-entered
	peertest.WantExactRefusal(t, hosttest.CollectCall(t, w.Dial(t), "a1"), msg.CodeDuplicate, "attempt a1 is already being delivered")
	close(release)
	hosttest.WantAnswer(t, <-first)
	if w.App.Calls.Load() != 1 {
		t.Fatalf("delivered %d", w.App.Calls.Load())
	}
}

// TestCollectRefusals: a collect of an attempt the host has not seen, or
// of one not awaiting approval, or another controller's (none here), is
// refused naming the attempt's state.
func TestCollectRefusals(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{Operations: []string{"app/units.*"}})
	w.Serve(t)
	cl := w.Dial(t)
	peertest.WantExactRefusal(t, hosttest.CollectCall(t, cl, "nope"), msg.CodeUnknown, "attempt nope awaits no approval: the host has not seen it")
	res := peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1"))
	hosttest.WantAnswer(t, res)
	peertest.WantExactRefusal(t, hosttest.CollectCall(t, cl, "a1"), msg.CodeDuplicate, "attempt a1 is definite, not awaiting approval: it is never delivered twice")
}

// TestUnmarkedCallUnchanged: an operation the policy does not mark is a
// dispatch as before: answered at once, no ask, its receipt naming none.
func TestUnmarkedCallUnchanged(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{Operations: []string{"app/units.*"}})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1"))
	hosttest.WantAnswer(t, res)
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); r.Ask != "" || r.AnsweredBy != "" || r.Charge != 4 {
		t.Fatalf("receipt %+v", r)
	}
	// a listing is never marked, whatever the patterns
	if res := peertest.Call(t, cl, hosttest.WithAgent(peertest.ListDispatch(t, "a2"), "alice")); res.Outcome != msg.StateDefinite {
		t.Fatalf("listing %+v", res)
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAsk] != 0 {
		t.Fatalf("journal %v", n)
	}
}

// TestAskSurvivesKill: the ask is durable before anything waits on it: a
// host killed (-9) just after appending it restarts with the ask pending;
// answered with the host down, the same attempt is collected and
// delivered once.
func TestAskSurvivesKill(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	c := hosttest.StartChild(t, w.Store, operator.FailAfterAsk)
	cl := w.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := cl.Call(ctx, msg.TypeDispatch, hosttest.Calc(t, "a1", "alice", "c1"))
	cancel()
	if err == nil {
		t.Fatal("the dispatch was answered; the host should have died")
	}
	if ws := c.WaitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exit %v; stderr: %s", ws, c.Stderr.String())
	}
	var id string
	w.WithStore(t, func(s *operator.Store) {
		l, err := s.AskList(false)
		if err != nil || len(l) != 1 || l[0].Attempt != "a1" {
			t.Fatalf("asks after the kill %+v", l)
		}
		id = l[0].ID
		if _, err := s.AnswerAsk(id, hosttest.Human(msg.VerdictApprove, 1001, "")); err != nil {
			t.Fatal(err)
		}
	})
	c = hosttest.StartChild(t, w.Store, "")
	cl = w.Dial(t)
	res := hosttest.CollectCall(t, cl, "a1")
	hosttest.WantAnswer(t, res)
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); r.Ask != id || r.AnsweredBy != "uid:1001" {
		t.Fatalf("receipt %+v", r)
	}
	if w.App.Calls.Load() != 1 {
		t.Fatalf("delivered %d", w.App.Calls.Load())
	}
	c.Stop(t)
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 96 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestCollectAdvised: an advisor's approval is pushed and collected like a
// human's; the receipt names the advisor as agent:NAME.
func TestCollectAdvised(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{Advisors: []string{"rev"}})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if r := w.HostStore().Advise("ctl", hosttest.Advise(tk.ID, "rev", msg.VerdictApprove)); r.Refused != nil {
		t.Fatalf("advice refused: %+v", r.Refused)
	}
	hosttest.WantPush(t, w.Peer, "a1", tk.ID, msg.AskApproved)
	res := hosttest.CollectCall(t, cl, "a1")
	hosttest.WantAnswer(t, res)
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); r.Ask != tk.ID || r.AnsweredBy != "agent:rev" {
		t.Fatalf("receipt %+v", r)
	}
}

// TestJustificationBound: a justification of msg.MaxJustification bytes is
// carried into the ask; one byte more, or two lines, is refused before
// admission, nothing journaled.
func TestJustificationBound(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	d := hosttest.Calc(t, "a1", "alice", "c1")
	d.Justification = strings.Repeat("j", msg.MaxJustification+1)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, "the justification of 513 bytes is over the bound of 512")
	for _, two := range []string{"one\ntwo", "one\rtwo", "one\u2028two", "one\u2029two"} {
		d.Justification = two
		peertest.WantExactRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, "the justification must be one line")
	}
	d.Justification = strings.Repeat("j", msg.MaxJustification)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, d))
	if v, _ := w.HostStore().AskShow(tk.ID); v.Justification != d.Justification {
		t.Fatalf("justification of %d bytes", len(v.Justification))
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAsk] != 1 {
		t.Fatalf("journal %v", n)
	}
}

// TestLegacyPrincipalMarked: a legacy allow-list peer's calls (principal
// uid:N) are marked for approval by a limits record naming uid:N, as a
// configured agent's are: the call becomes an ask, and nothing is held.
func TestLegacyPrincipalMarked(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, &views.AgentSpec{Agent: "uid:2001", Approval: &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}}})
	legacy := "uid:2001"
	w.Peer.Principal.Store(&legacy)
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "l1", "uid:2001", "c1")))
	if w.App.Calls.Load() != 0 || w.Peer.Reserves.Load() != 0 {
		t.Fatal("a marked call of a legacy principal reached the application or asked consent")
	}
	if p, _ := w.HostStore().PurseShow("ctl"); p.Holds != 0 || p.Balance != 100 {
		t.Fatalf("purse %+v", p)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if v, err := s.AskShow(tk.ID); err != nil || v.Agent != "uid:2001" || v.State != msg.AskPending {
			t.Fatalf("the ask of a legacy principal: %+v %v", v, err)
		}
	})
}

// TestAskExpiresOnItsOwn: while the host runs, a pending ask expires when
// its time comes, with nothing reading it: the host's timer journals the
// expiry and pushes the verdict to the controller, which would otherwise
// learn it only from its next collect. (The store's clock is the test's:
// it is moved to the expiry, and the timer, counted on that clock, is
// woken by the next ask event, a second call's ask.)
func TestAskExpiresOnItsOwn(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{ExpiryMs: 60_000})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "e1", "alice", "c1")))
	clk.Add(time.Minute)
	hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "e2", "alice", "c1")))
	hosttest.WantPush(t, w.Peer, "e1", tk.ID, msg.AskExpired)
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAskExpired] != 1 {
		t.Fatalf("journal %v: want the one expiry", n)
	}
}
