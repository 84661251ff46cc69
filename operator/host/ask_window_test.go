package host_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// rfc is a unix ms instant as the reasons word it.
func rfc(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// TestApprovalLapsesUncollected is the attacker's late collect: an
// approved ask is left uncollected; one millisecond before its collect
// window ends (the ask's expiry duration from the approval) it is still
// approved, at its end it lapses (an ask-lapsed record) to its on-timeout
// verdict deny, and the collect after is refused as denied with its
// receipt, again and again, and a late answer is refused: nothing was
// reserved, consented, delivered or charged.
func TestApprovalLapsesUncollected(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	approvedAt := clk.Now().UnixMilli()
	v, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "ann"))
	window := tk.ExpiresAt - v.RaisedAt
	if err != nil || v.CollectBy != approvedAt+window || window != 24*3600_000 {
		t.Fatalf("approved: %+v %v; want collectBy %d", v, err, approvedAt+window)
	}
	clk.Add(time.Duration(window-1) * time.Millisecond)
	if v, _ := w.HostStore().AskShow(tk.ID); v.State != msg.AskApproved {
		t.Fatalf("a millisecond before its window ends: %s", v.State)
	}
	clk.Add(time.Millisecond)
	if v, _ := w.HostStore().AskShow(tk.ID); v.State != msg.AskLapsed || v.AnsweredBy != "uid:1001" {
		t.Fatalf("at its window's end: %+v", v)
	}
	want := fmt.Sprintf("the call's approval (ask %s, by uid:1001) lapsed uncollected at %s to its on-timeout verdict deny; nothing was reserved, sent or charged",
		tk.ID, rfc(approvedAt+window))
	res := hosttest.CollectCall(t, cl, "a1")
	peertest.WantExactRefusal(t, res, msg.CodeDenied, want)
	r := hosttest.VerifiedReceipt(t, w, res.Receipt)
	if r.Outcome != msg.StateRefused || r.Charge != 0 || r.Ask != tk.ID || r.AnsweredBy != "uid:1001" ||
		r.Reason != fmt.Sprintf("approved by uid:1001 at %s, not collected within its window: lapsed at %s to deny", rfc(approvedAt), rfc(approvedAt+window)) {
		t.Fatalf("receipt %+v", r)
	}
	again := hosttest.CollectCall(t, cl, "a1")
	peertest.WantExactRefusal(t, again, msg.CodeDenied, want)
	if string(again.Receipt) != string(res.Receipt) {
		t.Fatal("a second collect of the lapsed ask carries another receipt")
	}
	_, err = w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1002, "bob"))
	if wantErr := fmt.Sprintf("refused: ask %s was already answered: approved by uid:1001 at %s, then lapsed uncollected at %s to deny", tk.ID, rfc(approvedAt), rfc(approvedAt+window)); err == nil || err.Error() != wantErr {
		t.Fatalf("a late answer: %v\nwant %s", err, wantErr)
	}
	if w.App.Calls.Load() != 0 || w.Peer.Reserves.Load() != 0 {
		t.Fatal("a lapsed approval reached the application or asked consent")
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAskLapsed] != 1 || n[hostlog.KindRefused] != 1 || n[hostlog.KindReserveV2] != 0 {
		t.Fatalf("journal %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 100 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
		if v, _ := s.AskShow(tk.ID); v.State != msg.AskLapsed || v.CollectBy != approvedAt+window {
			t.Fatalf("the reopened store's ask %+v", v)
		}
		if rep, err := audit.VerifyStore(w.Store); err != nil || len(rep.Findings) != 0 {
			t.Fatalf("verify %+v %v", rep, err)
		}
	})
}

// TestApprovalWindowOnTimeoutApprove: an ask that would expire to approve
// has no collect window: approved and collected thirty expiries later, it
// is delivered once (a lapse to approve would change nothing).
func TestApprovalWindowOnTimeoutApprove(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{OnTimeout: msg.VerdictApprove, ExpiryMs: 60_000})
	w.Serve(t)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if v, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "ann")); err != nil || v.CollectBy != 0 {
		t.Fatalf("approved: %+v %v; want no collect window", v, err)
	}
	clk.Add(30 * time.Minute) // thirty expiries, within the world's grant
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeCollect, msg.Collect{Attempt: "a1", Deadline: clk.Now().Add(time.Hour).UnixMilli()})
	var res msg.DispatchResult
	if err != nil || env.Decode(&res) != nil {
		t.Fatalf("collect: %v", err)
	}
	hosttest.WantAnswer(t, res)
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAskLapsed] != 0 || n[hostlog.KindAskWindow] != 0 {
		t.Fatalf("journal %v", n)
	}
}

// TestApprovalWindowOfAnOlderApproval: an ask approved by a host before
// collect windows (its ask-answer record has no collectBy) gets its window
// once, when the upgraded host first reads it: an ask-window record with
// that instant plus the expiry duration, the same after a restart and a
// replay and in a snapshot (never given twice); at its end it lapses, and its collect is
// refused as denied.
func TestApprovalWindowOfAnOlderApproval(t *testing.T) {
	w, clk := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, w.Dial(t), hosttest.Calc(t, "a1", "alice", "c1")))
	w.Stop()
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindAskAnswer, hostlog.AskAnswer{Ask: tk.ID, Verdict: msg.VerdictApprove, By: "uid:1001",
		Account: "ann", At: clk.Now().UnixMilli()})
	clk.Add(time.Hour)
	firstRead := clk.Now().UnixMilli()
	w.Serve(t)
	window := int64(24 * 3600_000)
	if v, err := w.HostStore().AskShow(tk.ID); err != nil || v.State != msg.AskApproved || v.CollectBy != firstRead+window {
		t.Fatalf("first read by the upgraded host: %+v %v; want collectBy %d", v, err, firstRead+window)
	}
	// The stop made a snapshot holding the window: the host started again
	// loads it from there, and gives nothing again.
	w.Stop()
	w.Serve(t)
	if v, _ := w.HostStore().AskShow(tk.ID); v.CollectBy != firstRead+window {
		t.Fatalf("after a restart: collectBy %d, want %d", v.CollectBy, firstRead+window)
	}
	clk.Add(time.Duration(window) * time.Millisecond)
	peertest.WantRefusal(t, hosttest.CollectCall(t, w.Dial(t), "a1"), msg.CodeDenied, "lapsed uncollected at "+rfc(firstRead+window))
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAskWindow] != 1 || n[hostlog.KindAskLapsed] != 1 || n[hostlog.KindReserveV2] != 0 {
		t.Fatalf("journal %v", n)
	}
	if w.App.Calls.Load() != 0 {
		t.Fatal("a lapsed approval reached the application")
	}
}
