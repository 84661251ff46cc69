package host_test

import (
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// controlCall sends one request on the control channel and decodes its
// answer into out, or returns the refusal.
func controlCall(t *testing.T, cl *wire.Client, typ string, body, out any) *msg.Refusal {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, typ, body)
	if err != nil {
		t.Fatal(err)
	}
	if env.T == msg.TypeRefused {
		var r msg.Refusal
		if err := env.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	if err := env.Decode(out); err != nil {
		t.Fatalf("%s: %s: %v", typ, env.T, err)
	}
	return nil
}

// TestControlAdvisors: on the controller's control channel an advisor
// (named by the controller) lists exactly the pending asks it may answer
// and answers one; a second answer, its own ask, an agent that advises
// nobody and a malformed verdict are refused with their one line, the
// ask unchanged.
func TestControlAdvisors(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	aliceAsk, bobAsk := hosttest.RaiseAsks(t, w)
	cl := dialControl(t, w.Peer, controlPath(w), w.Pub)

	var res msg.AsksResult
	if ref := controlCall(t, cl, msg.TypeAsks, msg.Asks{Advisor: "rev"}, &res); ref != nil {
		t.Fatalf("asks refused: %+v", ref)
	}
	if len(res.Asks) != 1 || res.Asks[0].ID != aliceAsk || res.Asks[0].Agent != "alice" || string(res.Asks[0].Arguments) != `{"expression":"1+1"}` {
		t.Fatalf("rev's asks: %+v; want alice's %s alone", res.Asks, aliceAsk)
	}
	if ref := controlCall(t, cl, msg.TypeAsks, msg.Asks{Advisor: "carol"}, &res); ref == nil || ref.Code != msg.CodeApprovals ||
		ref.Reason != "agent carol is not an advisor of any agent's asks" {
		t.Fatalf("asks of a non-advisor: %+v", ref)
	}
	if ref := controlCall(t, cl, msg.TypeAsks, msg.Asks{Advisor: "uid:7"}, &res); ref == nil || ref.Code != msg.CodeBadRequest ||
		ref.Reason != `asks: agent name "uid:7": ':' is reserved (uid:N names a legacy allow-list peer)` {
		t.Fatalf("asks of a malformed advisor: %+v", ref)
	}

	var ar msg.AdviseResult
	for _, c := range []struct {
		ad   msg.Advise
		code string
		want string
	}{
		{hosttest.Advise(bobAsk, "rev", msg.VerdictApprove), msg.CodeApprovals, "agent answers are not allowed for agent bob's asks"},
		{hosttest.Advise(aliceAsk, "alice", msg.VerdictApprove), msg.CodeApprovals, "an advisor never answers an ask raised by its own identity"},
		{hosttest.Advise(aliceAsk, "rev", "maybe"), msg.CodeBadRequest, `verdict "maybe" is none of approve, deny and wait`},
	} {
		ar = msg.AdviseResult{}
		if ref := controlCall(t, cl, msg.TypeAdvise, c.ad, &ar); ref != nil || ar.Refused == nil || ar.Refused.Code != c.code || ar.Refused.Reason != c.want {
			t.Errorf("advise %+v: %+v %+v; want %s %q", c.ad, ref, ar.Refused, c.code, c.want)
		}
	}
	ar = msg.AdviseResult{}
	if ref := controlCall(t, cl, msg.TypeAdvise, hosttest.Advise(aliceAsk, "rev", msg.VerdictApprove), &ar); ref != nil || ar.Refused != nil ||
		ar.Ask.State != msg.AskApproved || ar.Ask.AnsweredBy != "agent:rev" {
		t.Fatalf("rev approves: %+v %+v", ref, ar)
	}
	ar = msg.AdviseResult{}
	if ref := controlCall(t, cl, msg.TypeAdvise, hosttest.Advise(aliceAsk, "rev", msg.VerdictDeny), &ar); ref != nil || ar.Refused == nil ||
		ar.Refused.Reason != "ask "+aliceAsk+" was already answered" || ar.Ask.State != msg.AskApproved {
		t.Fatalf("a second answer: %+v %+v", ref, ar)
	}
	res = msg.AsksResult{}
	if ref := controlCall(t, cl, msg.TypeAsks, msg.Asks{Advisor: "rev"}, &res); ref != nil || len(res.Asks) != 0 {
		t.Fatalf("rev's asks after its answer: %+v %+v", ref, res.Asks)
	}
	if !strings.HasPrefix(aliceAsk, "ask-") {
		t.Fatalf("ask id %q", aliceAsk)
	}
}
