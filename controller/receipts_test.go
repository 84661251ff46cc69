package controller

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stewardrt/steward/operator"
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
	st, err := operator.OpenReadOnly(s.store)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := st.VerifyReceipts(1)
	if err != nil || rep.Receipts != 4 || rep.Purses[0].Charged != 7 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	export, err := st.ExportReceipts()
	st.Close()
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
