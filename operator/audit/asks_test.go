package audit_test

import (
	"fmt"
	"os"
	"strings"
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

// TestVerifyApprovals: receipts verify finds every reservation of an
// operation the agent's limits in force marked for approval that has no
// approved ask before it (none, one undecided, one denied), and none for
// an approved one or for a call made before the operation was marked.
func TestVerifyApprovals(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	w.Serve(t)
	// A call of alice's before any policy: the host reserves and answers it.
	d := peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)
	d.Agent = "alice"
	alice := "alice"
	w.Peer.Principal.Store(&alice) // the payer consents for alice
	if res := peertest.Call(t, w.Dial(t), d); res.Outcome != msg.StateDefinite {
		t.Fatal(res)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if v, err := audit.VerifyStore(s.Dir()); err != nil || len(v.Findings) != 0 {
			t.Fatalf("before the policy: %+v %v", v.Findings, err)
		}
		// From here on alice's calls to calc.* wait for an approval.
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice", Approval: hosttest.HumansOnly()}); err != nil {
			t.Fatal(err)
		}
	})
	// raise raises the ask of alice's call in conversation c1 (attempt id)
	// as the host does, through the store's dispatch on route r1, and
	// answers it with verdict unless that is empty.
	raise := func(attempt string, verdict msg.Verdict) string {
		t.Helper()
		var id string
		w.WithStore(t, func(s *operator.Store) {
			ctx, cancel := peertest.Ctx()
			defer cancel()
			d := hosttest.Calc(t, attempt, "alice", "c1")
			id = hosttest.WantAwaiting(t, s.Dispatch(ctx, operator.ForwardSocket{Route: "r1", Forward: w.Route.Forward, Controller: "ctl"}, &d)).ID
			if verdict == "" {
				return
			}
			if _, err := s.AnswerAsk(id, hosttest.Human(verdict, os.Geteuid(), "root")); err != nil {
				t.Fatal(err)
			}
		})
		return id
	}
	// reserve appends a reservation of alice's call (attempt id) to the
	// stopped store, as it is: no ask or approval is checked.
	reserve := func(attempt string) {
		t.Helper()
		d := peertest.InvokeDispatch(t, attempt, "calc.evaluate", `{"expression":"1+1"}`)
		rec := hostlog.ReserveV2{Reserve: hostlog.Reserve{Attempt: attempt, Controller: "ctl", Grant: w.Grant, Application: "app",
			Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), Day: utcDay(time.Now()),
			Ledger: hosttest.NextLedger(t, w.Store)},
			Method: d.Method, Path: d.Path, Body: d.Body, Agent: "alice", Conversation: "c1"}
		hosttest.Append(t, w.Store, w.Pub, hostlog.KindReserveV2, rec)
	}
	me := fmt.Sprintf("uid:%d", os.Geteuid())
	reserve("a4") // no ask
	raise("a5", msg.VerdictApprove)
	reserve("a5")
	denied := raise("a6", msg.VerdictDeny)
	reserve("a6")
	pending := raise("a7", "")
	reserve("a7")

	rep, err := audit.VerifyStore(w.Store)
	var marked []string
	for _, f := range rep.Findings {
		if strings.Contains(f, "marked for approval") {
			marked = append(marked, f)
		}
	}
	finding := func(attempt string) string { return "reservation of attempt " + attempt + " (journal record " }
	want := []string{
		"it has no ask",
		"its ask " + denied + " was denied by " + me,
		"its ask " + pending + " was not decided",
	}
	if err == nil || len(marked) != 3 {
		t.Fatalf("findings %q, err %v; want three of marked operations", rep.Findings, err)
	}
	for i, attempt := range []string{"a4", "a6", "a7"} {
		if !strings.HasPrefix(marked[i], finding(attempt)) ||
			!strings.HasSuffix(marked[i], "): app/calc.evaluate is marked for approval by agent alice's limits (revision 1), and "+want[i]) {
			t.Errorf("finding %d: %q; want attempt %s and %q", i, marked[i], attempt, want[i])
		}
	}
}
