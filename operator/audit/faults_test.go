package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// paidWorld is a stopped host, shaped by o, that made three paid calls
// (a1..a3), and its key: the receipts every forgery test starts from.
func paidWorld(t *testing.T, o hosttest.Opts) (*hosttest.World, *wire.HybridSigningKey) {
	w := hosttest.NewWorld(t, o)
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"a1", "a2", "a3"} {
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatal(res)
		}
	}
	w.Stop()
	key, err := operator.ReadKey(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	return w, key
}

// forge appends a reserve and an outcome whose receipt is built by edit.
// The store is stopped: the records are written to its journal as they
// are (hosttest.Append), at the next ledger number (hosttest.NextLedger).
func forge(t *testing.T, w *hosttest.World, key *wire.HybridSigningKey, edit func(*msg.Receipt, *hostlog.Outcome)) error {
	var res msg.InspectResult
	w.WithStore(t, func(s *operator.Store) { res, _ = s.Inspect("ctl", "a3") })
	last, _ := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	ledger := hosttest.NextLedger(t, w.Store)
	d := peertest.InvokeDispatch(t, "a4", "calc.evaluate", `{"expression":"1+1"}`)
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindReserve, hostlog.Reserve{Attempt: "a4", Controller: "ctl", Grant: w.Grant, Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), Charge: 0, Day: utcDay(time.Now()), Ledger: ledger})
	body := []byte(`{}`)
	sum := sha256.Sum256(body)
	r := msg.Receipt{Seq: 4, Prev: msg.ReceiptHash(res.Receipt), Attempt: "a4", Controller: "ctl", Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), ResponseSHA256: sum[:], Status: 200,
		Charge: 0, BalanceAfter: last.BalanceAfter, At: time.Now().UnixMilli(), Agent: peertest.Agent}
	rec := hostlog.Outcome{Attempt: "a4", Status: 200, Body: body, Seq: 4, Ledger: ledger}
	edit(&r, &rec)
	if rec.Receipt == nil {
		rec.Receipt, _ = msg.SignReceipt(key.Ed25519(), r)
	}
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindOutcome, rec)
	_, err := audit.VerifyStore(w.Store)
	return err
}

// tamper appends records to a stopped store's journal as a forger with the
// host key would, then expects audit.VerifyStore to name the fault.
func TestReceiptsVerifyFaults(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		w, _ := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
		w.WithStore(t, func(s *operator.Store) {
			rep, err := audit.VerifyStore(s.Dir())
			if err != nil || rep.Receipts != 3 || rep.Uncovered != 0 || rep.Purses[0].Balance != 70 || rep.Purses[0].Charged != 30 {
				t.Fatalf("%+v %v", rep, err)
			}
			f, err := audit.ExportStore(s.Dir())
			if err != nil {
				t.Fatal(err)
			}
			if rep, err := audit.VerifyFile(f, s.PublicKey()); err != nil || rep.Receipts != 3 {
				t.Fatalf("file: %+v %v", rep, err)
			}
			other, _ := wire.GenerateHybridKey()
			if _, err := audit.VerifyFile(f, other.Public()); !errors.Is(err, hostlog.ErrReceiptFault) {
				t.Fatalf("other pinned key: %v", err)
			}
		})
	})
	cases := []struct {
		name string
		edit func(*msg.Receipt, *hostlog.Outcome)
		want string
	}{
		{"consistent forgery verifies", func(*msg.Receipt, *hostlog.Outcome) {}, ""},
		{"charge changed", func(r *msg.Receipt, _ *hostlog.Outcome) { r.Charge = 1 }, "charges 1, the reservation was 0"},
		{"balance changed", func(r *msg.Receipt, _ *hostlog.Outcome) { r.BalanceAfter++ }, "balance after is 71, but the purse history of ctl gives 70"},
		{"chain broken", func(r *msg.Receipt, _ *hostlog.Outcome) { r.Prev = make([]byte, 32) }, "the chain is broken"},
		{"receipt removed", func(r *msg.Receipt, o *hostlog.Outcome) { r.Seq, o.Seq = 5, 5 }, "receipt 4 is missing"},
		{"byte flipped", func(r *msg.Receipt, o *hostlog.Outcome) {
			signed, _ := msg.SignReceipt(testKey, *r)
			signed[len(signed)-5] ^= 1
			o.Receipt = signed
		}, "receipt in journal record"},
		{"response changed", func(_ *msg.Receipt, o *hostlog.Outcome) { o.Body = []byte(`{"x":1}`) }, "response hash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, key := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
			testKey = key.Ed25519()
			err := forge(t, w, key, tc.edit)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want fault %q, got %v", tc.want, err)
			}
			// and the command exits non-zero naming it
			if code, _, errs := hosttest.RunCLI("receipts", "verify", "--store", w.Store); code != cli.ExitFailure || !strings.Contains(errs, tc.want) {
				t.Fatalf("cli: %d %q", code, errs)
			}
		})
	}
	t.Run("file faults", func(t *testing.T) {
		w, _ := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
		var f []byte
		w.WithStore(t, func(s *operator.Store) { f, _ = audit.ExportStore(s.Dir()) })
		var rf msg.ReceiptsFile
		if err := wire.Unmarshal(f, &rf); err != nil {
			t.Fatal(err)
		}
		check := func(name string, mod func(*msg.ReceiptsFile), want string) {
			var c msg.ReceiptsFile
			wire.Unmarshal(f, &c)
			mod(&c)
			b, _ := wire.Marshal(c)
			if _, err := audit.VerifyFile(b, w.Pub); !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: want %q, got %v", name, want, err)
			}
		}
		check("byte flipped", func(c *msg.ReceiptsFile) { c.Receipts[1][len(c.Receipts[1])-3] ^= 1 }, "file entry 2")
		check("receipt removed", func(c *msg.ReceiptsFile) { c.Receipts = append(c.Receipts[:1], c.Receipts[2:]...) }, "receipt 2 is missing")
		check("checkpoint flipped", func(c *msg.ReceiptsFile) { c.Checkpoints[0][len(c.Checkpoints[0])-3] ^= 1 }, "checkpoint")
		check("last receipt removed", func(c *msg.ReceiptsFile) { c.Receipts = c.Receipts[:2] }, "covers receipt 3, but there are 2 receipts")
		_ = hex.EncodeToString
	})
}

var testKey *wire.SigningKey
