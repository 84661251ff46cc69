package audit_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestReceiptsVerifyByAgent: receipts verify --json groups the receipts by
// agent (count and charges), in the store and in an exported file; a
// refusal whose consent named another principal is no finding.
func TestReceiptsVerifyByAgent(t *testing.T) {
	w, _ := agentWorld(t, hosttest.Opts{Fund: 100, Price: 4}, nil)
	w.Serve(t)
	cl := w.Dial(t)
	wantAnswer(t, peertest.Call(t, cl, calc(t, "a1", "alice", "c1")))
	wantAnswer(t, peertest.Call(t, cl, calc(t, "a2", "alice", "c2")))
	peertest.Call(t, cl, calc(t, "b1", "bob", "c1")) // the consent names alice: refused, receipted
	bob := "bob"
	w.Peer.Principal.Store(&bob)
	wantAnswer(t, peertest.Call(t, cl, calc(t, "b2", "bob", "c1")))
	w.Peer.Principal.Store(nil)
	wantAnswer(t, peertest.Call(t, cl, calc(t, "n1", "", "c1")))
	w.Stop()
	want := []audit.AgentReport{{"alice", 2, 8}, {"bob", 2, 4}, {"", 1, 4}}
	code, out, errs := hosttest.RunCLI("receipts", "verify", "--store", w.Store, "--json")
	var rep audit.ReceiptReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("verify: exit %d %v: %s %s", code, err, out, errs)
	}
	if !slices.Equal(rep.Agents, want) || len(rep.Findings) != 0 {
		t.Fatalf("agents %+v, findings %v", rep.Agents, rep.Findings)
	}
	w.WithStore(t, func(s *operator.Store) {
		b, err := s.ExportReceipts()
		if err != nil {
			t.Fatal(err)
		}
		frep, err := audit.VerifyFileKeys(b, audit.FileKeys{Host: w.Pub, Dispatch: w.Peer.Disp.Public(), Controller: "ctl"})
		if err != nil || !slices.Equal(frep.Agents, want) {
			t.Fatalf("file: %+v %v", frep.Agents, err)
		}
	})
}

// TestReceiptAgentNotConsentPrincipal: a receipt that charges an agent on
// a consent naming another principal is a finding.
func TestReceiptAgentNotConsentPrincipal(t *testing.T) {
	p := peertest.NewPeer(t, "ctl")
	host, _ := wire.GenerateSigningKey()
	cons, err := msg.SignConsent(p.Disp, msg.Consent{V: msg.CustodyV2, Attempt: "a1", Controller: "ctl", Principal: "bob",
		Application: "app", Operation: "op", RequestSHA256: make([]byte, 32), Charge: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := msg.Receipt{V: msg.ReceiptV2, Seq: 1, Attempt: "a1", Controller: "ctl", Application: "app", Operation: "op",
		Charge: 3, Consent: cons, Outcome: msg.StateDefinite, Agent: "alice"}
	signed, err := msg.SignReceipt(host, r)
	if err != nil {
		t.Fatal(err)
	}
	rs := []chainReceipt{{signed: signed, r: r, where: "file entry 1"}}
	reps, findings := agentReports(rs, func(string) *wire.Keyring { return wire.NewKeyring(p.Disp.Public()) })
	if !slices.Equal(reps, []audit.AgentReport{{"alice", 1, 3}}) ||
		!slices.Equal(findings, []string{`receipt 1 (file entry 1): names agent "alice", but its payer consent names principal "bob"`}) {
		t.Fatalf("%+v %q", reps, findings)
	}
	// Without the controller's key nothing is checked.
	if _, findings := agentReports(rs, func(string) *wire.Keyring { return nil }); len(findings) != 0 {
		t.Fatalf("unchecked: %q", findings)
	}
}
