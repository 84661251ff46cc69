package audit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// TestReceiptNamingNoAgent: in a crafted journal, a receipt naming no
// agent after its controller's receipts named one (a call admitted past
// the agents' limits) is a finding of the store's verify, of the
// exported file's, and of the command (exit 1); the same receipt naming
// its agent verifies.
func TestReceiptNamingNoAgent(t *testing.T) {
	w, key := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	err := forge(t, w, key, func(r *msg.Receipt, _ *hostlog.Outcome) { r.Agent = "" })
	want := "names no agent, after receipt 1 named one of controller \"ctl\": the host admitted a dispatch naming no principal, past the agents' limits"
	if !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), "receipt 4 (journal record ") || !strings.Contains(err.Error(), want) {
		t.Fatalf("want the finding %q, got %v", want, err)
	}
	if code, _, errs := hosttest.RunCLI("receipts", "verify", "--store", w.Store); code != cli.ExitFailure || !strings.Contains(errs, want) {
		t.Fatalf("cli: %d %q", code, errs)
	}
	w.WithStore(t, func(s *operator.Store) {
		f, err := audit.ExportStore(s.Dir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := audit.VerifyFile(f, s.PublicKey()); !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), "receipt 4 (file entry 4): "+want) {
			t.Fatalf("file: want the finding, got %v", err)
		}
	})
	w, key = paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	if err := forge(t, w, key, func(*msg.Receipt, *hostlog.Outcome) {}); err != nil {
		t.Fatalf("the receipt naming its agent: %v", err)
	}
}

// TestResolvedReceiptNamingNoAgent: an attempt reserved before agents
// (a first-version reserve, naming none) and resolved by the operator
// after its controller's receipts named an agent has a receipt naming no
// agent, and that is no finding: it names its resolver, and its attempt
// was admitted before the upgrade.
func TestResolvedReceiptNamingNoAgent(t *testing.T) {
	w, _ := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	d := peertest.InvokeDispatch(t, "a4", "calc.evaluate", `{"expression":"1+1"}`)
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindReserve, hostlog.Reserve{Attempt: "a4", Controller: "ctl", Grant: w.Grant, Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), Charge: 0,
		Day: utcDay(time.Now()), Ledger: hosttest.NextLedger(t, w.Store)})
	if code, _, errs := hosttest.RunCLI("attempts", "resolve", "a4", "--release", "--reason", "never sent", "--store", w.Store); code != cli.ExitOK {
		t.Fatalf("resolve: %d %s", code, errs)
	}
	rep, err := audit.VerifyStore(w.Store)
	if err != nil || rep.Receipts != 4 || len(rep.Findings) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
