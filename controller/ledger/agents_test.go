package ledger

import (
	"testing"

	"github.com/stewardrt/steward/wire/msg"
)

// of is b begun by agent, with the body a scoped requestId gives it.
func of(agent string, b Begin) Begin {
	b.Agent, b.Principal, b.ScopedRequestID = agent, agent, "s-"+agent+"-"+b.RequestID
	return b
}

// TestAgentsIsolated: the same requestId from two agents is two attempts;
// one agent's definite, pending or uncertain attempt decides nothing of
// another's, and each agent's own still decides its own.
func TestAgentsIsolated(t *testing.T) {
	l := New()
	if _, ok := l.Begin(of("alpha", begin("a1", "r1", "x"))); !ok {
		t.Fatal("alpha's first begin refused")
	}
	// alpha's r1 is pending: beta's r1, same or other arguments, begins.
	if p, ok := l.Begin(of("beta", begin("b1", "r1", "x"))); !ok {
		t.Fatalf("beta's r1 decided by alpha's pending attempt: %+v", p)
	}
	l.Finish(Result{Attempt: "a1", Outcome: msg.StateDefinite, Status: 200}, at(5))
	l.Unfinished("b1", "lost")
	if p, ok := l.Begin(of("gamma", begin("g1", "r1", "y"))); !ok {
		t.Fatalf("gamma's r1 decided by another agent's attempt: %+v", p)
	}
	p, ok := l.Begin(of("alpha", begin("a2", "r1", "x")))
	if ok || p.Attempt != "a1" || p.State != msg.StateDefinite || !p.SameRequest || p.Unscoped {
		t.Fatalf("alpha's own replay: %+v %v", p, ok)
	}
	p, ok = l.Begin(of("beta", begin("b2", "r1", "x")))
	if ok || p.Attempt != "b1" || p.State != msg.StateUncertain {
		t.Fatalf("beta's own uncertain attempt: %+v %v", p, ok)
	}
	if u := l.UncertainAttempts(); len(u) != 1 || u[0].Agent != "beta" {
		t.Fatalf("uncertain %+v", u)
	}
}

// TestBeginsBeforeAgents: a begin written before agents belongs to the
// principal it recorded, and says its body carried the requestId
// unscoped; one written before principals belongs to no agent, so no
// call of any agent is decided by it.
func TestBeginsBeforeAgents(t *testing.T) {
	l := New()
	old := begin("o1", "r1", "x")
	old.Principal = "uid:1000"
	l.begin(old, 3, false) // found at start: uncertain
	none := begin("o2", "r2", "x")
	l.begin(none, 4, false)
	p, ok := l.Begin(of("uid:1000", begin("n1", "r1", "x")))
	if ok || p.Attempt != "o1" || !p.Unscoped || p.RequestSHA256 != [32]byte(old.RequestSHA256) {
		t.Fatalf("the principal's old attempt: %+v %v", p, ok)
	}
	if _, ok := l.Begin(of("alpha", begin("n2", "r1", "x"))); !ok {
		t.Fatal("another agent decided by uid:1000's old attempt")
	}
	for _, agent := range []string{"uid:1000", "alpha", "foreground"} {
		if p, ok := l.Begin(of(agent, begin("n3-"+agent, "r2", "x"))); !ok {
			t.Fatalf("%s decided by a begin that names no principal: %+v", agent, p)
		}
	}
	if a, _, _ := l.Open("o2"); a.Agent != "" {
		t.Fatalf("a begin before principals shows agent %q", a.Agent)
	}
}
