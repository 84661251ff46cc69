package host_test

import (
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// TestConversationName: a dispatch names the agent's own conversationId
// beside the body's scoped one. Named right, the ask shows it (and keeps
// the scoped id the application sees); a name the body's id is not the
// scoping of for the agent (another agent's, another conversation's) is
// refused with one line before anything is admitted: nothing journaled,
// consented to, sent or charged, the attempt not seen.
func TestConversationName(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4},
		&views.AgentSpec{Approval: &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}}})
	w.Serve(t)
	cl := w.Dial(t)
	scoped := oracleops.ScopedConversationID("alice", "mine")
	d := hosttest.Calc(t, "n1", "alice", scoped)
	d.ConversationName = "mine"
	k := hosttest.WantAwaiting(t, peertest.Call(t, cl, d)).ID
	for _, name := range []string{"other", oracleops.ScopedConversationID("bob", "mine")} {
		d := hosttest.Calc(t, "n2", "alice", scoped)
		d.ConversationName = name
		want := `the conversation name "` + name + `" is not the body's conversationId of agent alice`
		peertest.WantExactRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, want)
		refusedUnseen(t, w, cl, "n2", 0, 0)
	}
	w.Stop()
	if n := hosttest.Kinds(t, w.Store); n[hostlog.KindAsk] != 1 || n[hostlog.KindReserveV2] != 0 || n[hostlog.KindRefused] != 0 {
		t.Fatalf("journal: %v", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		v, err := s.AskShow(k)
		if err != nil || v.ConversationName != "mine" || v.Conversation != scoped {
			t.Fatalf("the ask after a restart: %+v %v", v, err)
		}
		if p, _ := s.PurseShow("ctl"); p.Balance != 100 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
	})
}
