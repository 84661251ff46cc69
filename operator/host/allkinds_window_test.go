package host_test

import (
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// allKindsWindows raises an ask of alice's (its policy's expiry a minute)
// on the serving host, answers it with an approval as a host before
// collect windows recorded one (an ask-answer without collectBy, the host
// stopped), serves again and reads it (ask-window), lets its window pass
// (ask-lapsed) and collects it (refused as denied). No application is
// reached.
func allKindsWindows(t *testing.T, w *hosttest.World, clk *peertest.Clock) {
	t.Helper()
	pol := hosttest.HumansOnly()
	pol.ExpiryMs = 60_000
	if _, err := w.HostStore().SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice", Approval: pol}); err != nil {
		t.Fatal(err)
	}
	tk := hosttest.WantAwaiting(t, peertest.Call(t, w.Dial(t), hosttest.Calc(t, "w1", "alice", "c0")))
	w.Stop()
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindAskAnswer, hostlog.AskAnswer{Ask: tk.ID, Verdict: msg.VerdictApprove,
		By: "uid:1001", Account: "ann", At: clk.Now().UnixMilli()})
	w.Serve(t)
	if v, err := w.HostStore().AskShow(tk.ID); err != nil || v.CollectBy == 0 {
		t.Fatalf("the older approval's window: %+v %v", v, err)
	}
	clk.Add(time.Minute)
	peertest.WantRefusal(t, hosttest.CollectCall(t, w.Dial(t), "w1"), msg.CodeDenied, "lapsed uncollected")
}
