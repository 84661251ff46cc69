package operator

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestReceiptsVerifyByAgent: receipts verify --json groups the receipts by
// agent (count and charges), in the store and in an exported file; a
// refusal whose consent named another principal is no finding.
func TestReceiptsVerifyByAgent(t *testing.T) {
	w, _ := agentWorld(t, worldOpts{fund: 100, price: 4}, nil)
	w.serve(t)
	cl := w.dial(t)
	wantAnswer(t, call(t, cl, calc(t, "a1", "alice", "c1")))
	wantAnswer(t, call(t, cl, calc(t, "a2", "alice", "c2")))
	call(t, cl, calc(t, "b1", "bob", "c1")) // the consent names alice: refused, receipted
	bob := "bob"
	w.peer.principal.Store(&bob)
	wantAnswer(t, call(t, cl, calc(t, "b2", "bob", "c1")))
	w.peer.principal.Store(nil)
	wantAnswer(t, call(t, cl, calc(t, "n1", "", "c1")))
	w.stop()
	want := []AgentReport{{"alice", 2, 8}, {"bob", 2, 4}, {"", 1, 4}}
	code, out, errs := runCLI(t, "receipts", "verify", "--store", w.store, "--json")
	var rep ReceiptReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("verify: exit %d %v: %s %s", code, err, out, errs)
	}
	if !slices.Equal(rep.Agents, want) || len(rep.Findings) != 0 {
		t.Fatalf("agents %+v, findings %v", rep.Agents, rep.Findings)
	}
	w.withStore(t, func(s *Store) {
		b, err := s.ExportReceipts()
		if err != nil {
			t.Fatal(err)
		}
		frep, err := VerifyReceiptsFileKeys(b, FileKeys{Host: w.pub, Dispatch: w.peer.disp.Public(), Controller: "ctl"})
		if err != nil || !slices.Equal(frep.Agents, want) {
			t.Fatalf("file: %+v %v", frep.Agents, err)
		}
	})
}

// TestReceiptAgentNotConsentPrincipal: a receipt that charges an agent on
// a consent naming another principal is a finding.
func TestReceiptAgentNotConsentPrincipal(t *testing.T) {
	p := newPeer(t, "ctl")
	host, _ := wire.GenerateSigningKey()
	cons, err := msg.SignConsent(p.disp, msg.Consent{V: msg.CustodyV2, Attempt: "a1", Controller: "ctl", Principal: "bob",
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
	reps, findings := agentReports(rs, func(string) *wire.Keyring { return wire.NewKeyring(p.disp.Public()) })
	if !slices.Equal(reps, []AgentReport{{"alice", 1, 3}}) ||
		!slices.Equal(findings, []string{`receipt 1 (file entry 1): names agent "alice", but its payer consent names principal "bob"`}) {
		t.Fatalf("%+v %q", reps, findings)
	}
	// Without the controller's key nothing is checked.
	if _, findings := agentReports(rs, func(string) *wire.Keyring { return nil }); len(findings) != 0 {
		t.Fatalf("unchecked: %q", findings)
	}
}
