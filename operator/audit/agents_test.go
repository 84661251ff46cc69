package audit_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
)

// TestReceiptsVerifyByAgent: receipts verify --json groups the receipts by
// agent (count and charges), in the store and in an exported file; a
// refusal whose consent named another principal is no finding.
func TestReceiptsVerifyByAgent(t *testing.T) {
	w, _ := hosttest.AgentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, nil)
	w.Serve(t)
	cl := w.Dial(t)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c2")))
	peertest.Call(t, cl, hosttest.Calc(t, "b1", "bob", "c1")) // the consent names alice: refused, receipted
	bob := "bob"
	w.Peer.Principal.Store(&bob)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "b2", "bob", "c1")))
	w.Peer.Principal.Store(nil)
	hosttest.WantAnswer(t, peertest.Call(t, cl, hosttest.Calc(t, "n1", peertest.Agent, "c1")))
	w.Stop()
	want := []audit.AgentReport{{"alice", 2, 8}, {"bob", 2, 4}, {peertest.Agent, 1, 4}}
	code, out, errs := hosttest.RunCLI("receipts", "verify", "--store", w.Store, "--json")
	var rep audit.ReceiptReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("verify: exit %d %v: %s %s", code, err, out, errs)
	}
	if !slices.Equal(rep.Agents, want) || len(rep.Findings) != 0 {
		t.Fatalf("agents %+v, findings %v", rep.Agents, rep.Findings)
	}
	w.WithStore(t, func(s *operator.Store) {
		b, err := audit.ExportStore(s.Dir())
		if err != nil {
			t.Fatal(err)
		}
		frep, err := audit.VerifyFileKeys(b, audit.FileKeys{Host: w.Pub, Dispatch: w.Peer.Disp.Public(), Controller: "ctl"})
		if err != nil || !slices.Equal(frep.Agents, want) {
			t.Fatalf("file: %+v %v", frep.Agents, err)
		}
	})
}
