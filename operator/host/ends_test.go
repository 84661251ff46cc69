package host_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// wantRefusedReceipt checks that attempt id, refused after admission, has
// a durable signed receipt that says so: refused, charge 0, the reason,
// and the payer's consent exactly when it had one.
func wantRefusedReceipt(t *testing.T, w *hosttest.World, cl *wire.Client, id, reason string, consented bool) {
	t.Helper()
	in := peertest.Inspect(t, cl, id)
	r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if in.State != msg.StateRefused || err != nil {
		t.Fatalf("inspect %s: %+v, %v", id, in, err)
	}
	if r.V != msg.ReceiptV2 || r.Outcome != msg.StateRefused || r.Reason != reason || r.Charge != 0 ||
		r.PriceApplied != msg.PriceNone || r.Status != 0 || r.ResponseSHA256 != nil || (r.Consent != nil) != consented {
		t.Fatalf("receipt of %s: %+v", id, r)
	}
}

// receiptOfResult verifies a dispatch result's receipt.
func receiptOfResult(t *testing.T, w *hosttest.World, res msg.DispatchResult) msg.Receipt {
	t.Helper()
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatalf("receipt of %s (%s): %v", res.Attempt, res.Outcome, err)
	}
	return r
}

// TestChargesOnlyAnswers: a 2xx answer is charged the grant's price; any
// other status its refusal price, the rest of the reservation released;
// each receipt says which price applied, and the payer consented to both.
// verify checks every receipt and the purse arithmetic, from the journal
// and from an exported file against the controller's keys.
func TestChargesOnlyAnswers(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7, RefusalPrice: 3})
	w.Serve(t)
	cl := w.Dial(t)
	cases := []struct {
		id, op, args string
		status       int
		charge       uint64
		price        string
		balance      uint64
	}{
		{"ok", "calc.evaluate", `{"expression":"1+1"}`, 200, 7, msg.PriceAnswer, 93},
		{"div0", "calc.evaluate", `{"expression":"1/0"}`, 422, 3, msg.PriceRefusal, 90},
		{"nope", "calc.nope", `{}`, 404, 3, msg.PriceRefusal, 87},
	}
	for _, tc := range cases {
		res := peertest.Call(t, cl, peertest.InvokeDispatch(t, tc.id, tc.op, tc.args))
		if res.Outcome != msg.StateDefinite || res.Status != tc.status {
			t.Fatalf("%s: %+v %s", tc.id, res, res.Body)
		}
		r := receiptOfResult(t, w, res)
		if r.Outcome != msg.StateDefinite || r.Status != tc.status || r.Charge != tc.charge || r.PriceApplied != tc.price ||
			r.BalanceAfter != tc.balance || r.Reason != "" {
			t.Fatalf("%s: receipt %+v", tc.id, r)
		}
		c, err := msg.OpenConsent(r.Consent, wire.NewKeyring(w.Peer.Disp.Public()))
		if err != nil || c.Charge != 7 || c.RefusalPrice != 3 {
			t.Fatalf("%s: consent %+v %v: the reserve must ask for both prices", tc.id, c, err)
		}
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 87 || p.Charged != 13 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
		rep, err := audit.VerifyStore(w.Store)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Receipts != 3 || len(rep.Purses) != 1 || rep.Purses[0].Funded != 100 || rep.Purses[0].Charged != 13 || rep.Purses[0].Balance != 87 {
			t.Fatalf("report %+v", rep)
		}
		f, err := audit.ExportStore(w.Store)
		if err != nil {
			t.Fatal(err)
		}
		var ck msg.ControllerKeys
		if err := wire.Unmarshal(w.Peer.KeysFile(), &ck); err != nil {
			t.Fatal(err)
		}
		dk, err := wire.ParsePublicKey(ck.Dispatch)
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := audit.VerifyFileKeys(f, audit.FileKeys{Host: w.Pub, Dispatch: dk}); err != nil || rep.Receipts != 3 || len(rep.Findings) != 0 {
			t.Fatalf("file: %+v %v", rep, err)
		}
	})
}

// TestRefusalPriceOnDiscovery: a discovery reserves its discovery price,
// and its refusal price is never above it.
func TestRefusalPriceOnDiscovery(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7, DiscoveryPrice: 1, RefusalPrice: 3})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.DescribeDispatch(t, "d1", "calc.nope"))
	if res.Outcome != msg.StateDefinite || msg.IsAnswer(res.Status) {
		t.Fatalf("%+v %s", res, res.Body)
	}
	r := receiptOfResult(t, w, res)
	c, err := msg.OpenConsent(r.Consent, wire.NewKeyring(w.Peer.Disp.Public()))
	if err != nil || c.Charge != 1 || c.RefusalPrice != 1 || r.Charge != 1 || r.PriceApplied != msg.PriceRefusal {
		t.Fatalf("receipt %+v, consent %+v %v", r, c, err)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if _, err := audit.VerifyStore(w.Store); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNotSentReceipt: a delivery that failed before its first byte has a
// signed receipt: not-sent, charge 0, the delivery's reason, no host path,
// the payer's consent; the reservation is released.
func TestNotSentReceipt(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 4, NoApp: true})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ns1", "calc.evaluate", `{"expression":"1+1"}`))
	r := receiptOfResult(t, w, res)
	if res.Outcome != msg.StateNotSent || r.Outcome != msg.StateNotSent || r.Reason != "the application could not be reached" ||
		r.Charge != 0 || r.PriceApplied != msg.PriceNone || r.BalanceAfter != 10 || r.Consent == nil {
		t.Fatalf("%+v: receipt %+v", res, r)
	}
	peertest.WantNoInternals(t, r.Reason)
	if in := peertest.Inspect(t, cl, "ns1"); in.State != msg.StateNotSent || !bytes.Equal(in.Receipt, res.Receipt) {
		t.Fatalf("inspect %+v", in)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		rep, err := audit.VerifyStore(w.Store)
		if err != nil || rep.Receipts != 1 || rep.Purses[0].Balance != 10 || rep.Purses[0].Charged != 0 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
}

// TestRefusedAfterAdmissionVerifies: the receipts of refusals after
// admission (the payer's, and the last-moment check's) verify with the
// rest, and a refused attempt is never admitted again after a restart.
func TestRefusedAfterAdmissionVerifies(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 50, Price: 5})
	w.Serve(t)
	cl := w.Dial(t)
	w.Peer.RefuseReserve.Store(true)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "p1", "calc.evaluate", `{"expression":"1+1"}`))
	if r := receiptOfResult(t, w, res); res.Outcome != msg.StateRefused || r.Reason != "the payer refused: no-consent: not journaled" {
		t.Fatalf("%+v: %+v", res, r)
	}
	w.Peer.RefuseReserve.Store(false)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("%+v", res)
	}
	w.Stop()
	w.Serve(t)
	cl = w.Dial(t)
	wantRefusedReceipt(t, w, cl, "p1", "the payer refused: no-consent: not journaled", false)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "p1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDuplicate, "never delivered twice")
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		rep, err := audit.VerifyStore(w.Store)
		if err != nil || rep.Receipts != 2 || rep.Purses[0].Balance != 45 || rep.Purses[0].Receipts != 2 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
}

// TestGrantRefusalPriceBound: a refusal price is at most the price; one
// past it is refused (exit 2) with the exact reason, by the command and
// for a grant signed elsewhere; at the price it is issued and listed.
func TestGrantRefusalPriceBound(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{NoGrant: true})
	issue := []string{"grant", "issue", "--controller", "ctl", "--application", "app", "--price", "3", "--per-day", "5", "--not-after", "+1h", "--store", w.Store}
	code, _, errs := hosttest.RunCLI(append(issue, "--refusal-price", "4")...)
	if want := "steward-operator grant issue: refused: grant refusal price 4 is above the price 3: a refusal never costs more than an answer\n"; code != cli.ExitRefused || errs != want {
		t.Fatalf("exit %d %q, want %d %q", code, errs, cli.ExitRefused, want)
	}
	if code, _, errs := hosttest.RunCLI(append(issue, "--refusal-price", "3")...); code != cli.ExitOK {
		t.Fatalf("exit %d %s", code, errs)
	}
	code, out, errs := hosttest.RunCLI("grant", "list", "--store", w.Store)
	if code != cli.ExitOK || !strings.Contains(out, "price 3, discovery 0, refusal 3, 0/5 today") {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
	w.WithStore(t, func(s *operator.Store) {
		key, err := wire.ReadHybridKey(w.Store + "/" + operator.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		signed, err := msg.SignGrant(key, msg.Grant{ID: "g-over", Controller: "ctl", Application: "app", PerDay: 5, Price: 3, RefusalPrice: 4,
			NotBefore: now.UnixMilli(), NotAfter: now.Add(time.Hour).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.ImportGrant(signed)
		if want := "grant g-over: refusal price 4 is above the price 3: a refusal never costs more than an answer"; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("import: %v, want %q", err, want)
		}
	})
}
