package controller

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/wire/msg"
)

// TestReceiptOfEveryEnd runs a real host and controller through each end
// after admission: a 2xx answer charged the price, a 4xx charged the
// grant's refusal price (and, under a grant without one, nothing), the
// payer's refusal and a delivery that failed before sending, each with a
// receipt the controller checked and journaled, and the charge it
// returned. The host's `receipts verify` and the controller's `receipts
// compare` then agree on all of them.
func TestReceiptOfEveryEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The payer's day allows 9: the 4xx holds 5 and spends 2, the answer
	// holds and spends 5, and the third call's 5 is past the budget.
	s := newStack(t, stackOpts{price: 5, refusal: 2, funded: 100, edit: payerPolicy(map[string]any{"maxPerCall": 10, "perDay": 9})})
	s.startController()
	cs := s.client(ctx)
	wantEnd := func(tr ToolResult, outcome msg.State, status int, charge uint64) {
		t.Helper()
		if tr.Outcome != outcome || tr.Status != status || tr.Charge == nil || *tr.Charge != charge || tr.ReceiptID == "" {
			t.Fatalf("result %+v (refusal %+v), want %s %d charged %d with a receipt", tr, tr.Refusal, outcome, status, charge)
		}
	}
	bad := callArgs("bad-1", map[string]any{"nope": 1})
	tr, _ := call(t, ctx, cs, ToolCall, bad)
	if tr.Status < 400 || tr.Status > 499 {
		t.Fatalf("arguments the schema refuses: %+v", tr)
	}
	wantEnd(tr, msg.StateDefinite, tr.Status, 2)
	tr, _ = call(t, ctx, cs, ToolCall, callArgs("ok-1", map[string]any{"text": "x"}))
	wantEnd(tr, msg.StateDefinite, 200, 5)
	tr, _ = call(t, ctx, cs, ToolCall, callArgs("over-1", map[string]any{"text": "y"}))
	wantEnd(tr, msg.StateRefused, 0, 0)
	if tr.Refusal == nil || tr.Refusal.Code != msg.CodePayerLimit {
		t.Fatalf("payer refusal: %+v", tr.Refusal)
	}
	// The application's socket is gone: nothing is sent. The payer's day
	// is spent, so this call is free: a discovery.
	if err := os.Remove(s.appSock); err != nil {
		t.Fatal(err)
	}
	tr, _ = call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance"})
	if tr.Outcome != msg.StateNotSent || tr.Detail != "the application could not be reached" || tr.ReceiptID == "" || tr.Charge == nil || *tr.Charge != 0 {
		t.Fatalf("not sent: %+v", tr)
	}
	cs.Close()
	s.stopController()
	s.stop()
	if p := s.purse(); p.Charged != 7 || p.Balance != 93 {
		t.Fatalf("purse %+v: want 2 for the 4xx and 5 for the answer", p)
	}
	rep, err := audit.VerifyStore(s.store)
	if err != nil || rep.Receipts != 4 || rep.Purses[0].Charged != 7 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	export, err := audit.ExportStore(s.store)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompareReceipts(s.cfgPath, export)
	if err != nil || len(c.Findings) != 0 || c.Recorded != 4 || c.Matched != 4 {
		t.Fatalf("compare: %+v %v", c, err)
	}
}

// TestAppRefusalNotCharged: under a grant with no refusal price an
// application's 4xx is a definite answer charged nothing, and its receipt
// says no price applied.
func TestAppRefusalNotCharged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newStack(t, stackOpts{price: 5, funded: 100})
	s.startController()
	cs := s.client(ctx)
	tr, _ := call(t, ctx, cs, ToolCall, callArgs("bad-1", map[string]any{"nope": 1}))
	if tr.Outcome != msg.StateDefinite || tr.Status < 400 || tr.Status > 499 || tr.Charge == nil || *tr.Charge != 0 {
		t.Fatalf("%+v", tr)
	}
	cs.Close()
	s.stopController()
	s.stop()
	if p := s.purse(); p.Charged != 0 || p.Balance != 100 {
		t.Fatalf("purse %+v", p)
	}
}

// TestGrantAllowsRefusalPrice: the controller consents only to the
// refusal price of the grant the host cites, never above the price the
// call reserves (a discovery's), one off either way refused.
func TestGrantAllowsRefusalPrice(t *testing.T) {
	now := time.Now()
	g := msg.Grant{Controller: "dev", Application: "appliance", Price: 5, DiscoveryPrice: 1, RefusalPrice: 3,
		NotBefore: now.Add(-time.Minute).UnixMilli(), NotAfter: now.Add(time.Hour).UnixMilli()}
	invoke := ledger.Begin{Attempt: "a1", Application: "appliance", Operation: "op", Kind: msg.KindInvoke}
	list := ledger.Begin{Attempt: "a1", Application: "appliance", Kind: msg.KindList}
	for _, tc := range []struct {
		b              ledger.Begin
		charge, refuse uint64
		want           string
	}{
		{invoke, 5, 3, ""},
		{invoke, 5, 2, "the reserve for attempt a1 asks 5 credits (refusal 2), the grant it cites prices it at 5 (refusal 3)"},
		{invoke, 5, 4, "the reserve for attempt a1 asks 5 credits (refusal 4), the grant it cites prices it at 5 (refusal 3)"},
		{list, 1, 1, ""},
		{list, 1, 3, "the reserve for attempt a1 asks 1 credits (refusal 3), the grant it cites prices it at 1 (refusal 1)"},
	} {
		r := msg.Reserve{Attempt: "a1", Controller: "dev", Charge: tc.charge, RefusalPrice: tc.refuse}
		ref := grantAllows(g, r, tc.b, now)
		if got := ""; ref != nil {
			got = ref.Reason
			if got != tc.want {
				t.Errorf("%s %d/%d: %q, want %q", tc.b.Kind, tc.charge, tc.refuse, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s %d/%d: consented, want %q", tc.b.Kind, tc.charge, tc.refuse, tc.want)
		}
	}
}

// TestReceiptSays: a receipt must say the outcome the host's answer
// says, with terms that hold; a version 1 receipt only for an answer.
func TestReceiptSays(t *testing.T) {
	refusedRc := msg.Receipt{V: msg.ReceiptV2, Seq: 4, Outcome: msg.StateRefused, Reason: "the payer refused: x", PriceApplied: msg.PriceNone}
	for _, tc := range []struct {
		rc   msg.Receipt
		want msg.State
		err  string
	}{
		{refusedRc, msg.StateRefused, ""},
		{refusedRc, msg.StateNotSent, "receipt 4 says refused, the host's answer says not-sent"},
		{refusedRc, msg.StateDefinite, "receipt 4 says refused, the host's answer says definite"},
		{msg.Receipt{Seq: 4, Status: 200, Charge: 5}, msg.StateDefinite, ""},
		{msg.Receipt{Seq: 4}, msg.StateRefused, "receipt 4 says definite, the host's answer says refused"},
		{msg.Receipt{V: msg.ReceiptV2, Seq: 4, Outcome: msg.StateDefinite, Status: 404, Charge: 5, PriceApplied: msg.PriceAnswer}, msg.StateDefinite,
			`receipt 4: a 404 answer charging 5 applies the "answer" price, not "refusal"`},
		{msg.Receipt{V: msg.ReceiptV2, Seq: 4, Outcome: msg.StateRefused, Charge: 5, Reason: "x", PriceApplied: msg.PriceAnswer}, msg.StateRefused,
			`receipt 4: a receipt of refused charges 5 at the "answer" price: it charges nothing`},
	} {
		err := receiptSays(tc.rc, tc.want)
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.err {
				t.Errorf("%+v as %s: %q, want %q", tc.rc, tc.want, got, tc.err)
			}
		} else if tc.err != "" {
			t.Errorf("%+v as %s: passed, want %q", tc.rc, tc.want, tc.err)
		}
	}
}

// TestResolveRefusedAfterAdmission: the controller dies after the host
// refused an admitted call (the payer refused); after the restart the
// host reports it refused, with its receipt, and resolving it abandons
// the attempt with that receipt journaled: nothing charged, and compare
// matches the receipt.
func TestResolveRefusedAfterAdmission(t *testing.T) {
	s := newStack(t, stackOpts{price: 7, funded: 100, edit: payerPolicy(map[string]any{"maxPerCall": 5, "perDay": 100})})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	child := s.startChild("STEWARD_FAILPOINT=" + FailAfterAnswer)
	cs := s.client(ctx)
	callErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: callArgs("ref-1", map[string]any{"text": "x"})})
		callErr <- err
	}()
	select {
	case err := <-child.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("controller exit: %v, want SIGKILL", err)
		}
	case <-ctx.Done():
		t.Fatal("the controller did not reach the failpoint")
	}
	<-callErr
	s.startController()
	list, err := ListAttempts(s.cfgPath)
	if err != nil || len(list) != 1 {
		t.Fatalf("attempts list: %+v %v", list, err)
	}
	ins, err := ResolveAttempt(ctx, s.cfgPath, list[0].ID, nil)
	if err != nil || ins.HostState != msg.StateRefused || ins.Resolved != msg.StateAbandoned || ins.ReceiptID == "" {
		t.Fatalf("resolve: %v %+v", err, ins)
	}
	s.stopController()
	s.stop()
	if p := s.purse(); p.Charged != 0 {
		t.Fatalf("purse %+v", p)
	}
	export, err := audit.ExportStore(s.store)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := CompareReceipts(s.cfgPath, export); err != nil || len(c.Findings) != 0 || c.Matched != 1 {
		t.Fatalf("compare: %+v %v", c, err)
	}
}

// TestCheckEndReceiptAfterConsent: a refusal after the payer consented
// (the host's last-moment check) carries the very consent this controller
// signed, or none (it never reached the host), and charges nothing; one
// with another consent, another outcome, a response or a charge leaves
// the attempt uncertain. The good one is kept with the result, charged 0.
func TestCheckEndReceiptAfterConsent(t *testing.T) {
	rig := newConsentRig(t, &ctlconf.Payer{MaxPerCall: 10, PerDay: 100}, 5)
	r := rig.begin(t, "a1", "uid:1000", 5)
	typ, body := rig.c.reserve(r)
	if typ != msg.TypeConsent {
		t.Fatalf("consent: %s %+v", typ, body)
	}
	consent := body.(msg.ConsentReply).Consent
	p := &plan{application: "appliance", operation: "op", kind: msg.KindInvoke, principal: "uid:1000", conversationID: "c1"}
	copy(p.sha[:], r.RequestSHA256)
	good := msg.Receipt{V: msg.ReceiptV2, Seq: 7, Prev: make([]byte, 32), Attempt: "a1", Controller: "dev", Application: "appliance",
		Operation: "op", Kind: msg.KindInvoke, RequestSHA256: r.RequestSHA256, BalanceAfter: 50, Consent: consent,
		Outcome: msg.StateRefused, Reason: "refused after the payer's consent, before anything was sent: frozen", PriceApplied: msg.PriceNone}
	sign := func(rc msg.Receipt) []byte {
		b, err := msg.SignReceipt(rig.host.Ed25519(), rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	refusal := &msg.Refusal{Code: msg.CodeFrozen, Reason: "frozen"}
	res := rig.c.checkResult(p, msg.DispatchResult{Attempt: "a1", Outcome: msg.StateRefused, Refusal: refusal, Receipt: sign(good)})
	if res.Outcome != msg.StateRefused || res.Receipt == nil || res.Charge != 0 || res.Spent() != 0 {
		t.Fatalf("the good receipt: %+v", res)
	}
	// A host that signs the agent and conversation into it names the
	// attempt's.
	named := good
	named.Agent, named.Conversation = "uid:1000", "c1"
	if res := rig.c.checkResult(p, msg.DispatchResult{Attempt: "a1", Outcome: msg.StateRefused, Refusal: refusal, Receipt: sign(named)}); res.Outcome != msg.StateRefused {
		t.Fatalf("a receipt naming the attempt's agent and conversation: %+v", res)
	}
	// A consent signed here may never have reached the host: a refusal
	// without it, charging nothing, is one too.
	unreached := good
	unreached.Consent, unreached.Reason = nil, "refused before consent: the payer's consent could not be obtained"
	if res := rig.c.checkResult(p, msg.DispatchResult{Attempt: "a1", Outcome: msg.StateRefused, Refusal: refusal, Receipt: sign(unreached)}); res.Outcome != msg.StateRefused || res.Charge != 0 {
		t.Fatalf("a refusal before the consent reached the host: %+v", res)
	}
	for _, tc := range []struct {
		name string
		edit func(*msg.Receipt)
		want string
	}{
		{"another consent", func(rc *msg.Receipt) { rc.Consent = append([]byte(nil), rc.Consent[:len(rc.Consent)-1]...) },
			"receipt carries a payer consent other than the one signed for attempt a1"},
		{"another outcome", func(rc *msg.Receipt) { rc.Outcome = msg.StateNotSent }, "receipt 7 says not-sent, the host's answer says refused"},
		{"a response", func(rc *msg.Receipt) { rc.Status = 500 }, "receipt of an end without an answer names a response"},
		{"a charge", func(rc *msg.Receipt) { rc.Charge, rc.PriceApplied = 5, msg.PriceAnswer },
			`receipt 7: a receipt of refused charges 5 at the "answer" price: it charges nothing`},
		{"another attempt", func(rc *msg.Receipt) { rc.Attempt = "a2" }, "receipt is for attempt a2"},
		{"another agent", func(rc *msg.Receipt) { rc.Agent = "uid:1001" }, `receipt names agent "uid:1001", the attempt's is "uid:1000"`},
		{"another conversation", func(rc *msg.Receipt) { rc.Conversation = "c2" }, `receipt names conversation "c2", the attempt's is "c1"`},
		{"another agent, no consent", func(rc *msg.Receipt) { rc.Consent, rc.Agent = nil, "beta" }, `receipt names agent "beta", the attempt's is "uid:1000"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := good
			tc.edit(&rc)
			res := rig.c.checkResult(p, msg.DispatchResult{Attempt: "a1", Outcome: msg.StateRefused, Refusal: refusal, Receipt: sign(rc)})
			if res.Outcome != msg.StateUncertain || res.Detail != "the host's receipt did not verify: "+tc.want {
				t.Fatalf("%+v, want uncertain: %q", res, tc.want)
			}
		})
	}
}
