package crashtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// journals is what the three journals say, once every daemon has stopped.
type journals struct {
	// The controller's: every begun attempt's requestId (invokes only),
	// and the outcome its result or resolution recorded.
	attemptRequest map[string]string    // attempt -> requestId
	attemptEnd     map[string]msg.State // attempt -> result outcome or resolution
	begins         map[string]int       // requestId -> attempts begun
	// The host's: its verified receipts and purse.
	receipts    []msg.Receipt
	verify      audit.ReceiptReport
	purse       views.PurseView
	exportError string // what receipts export said when it failed
	// The application's: answers recorded, by the agent's requestId (the
	// application sees the scoped one, which the begins map back).
	answers map[string]int
}

// readJournals reads the controller journal read-only, verifies and
// exports the host's receipts with steward-operator, and reads the
// appliance journal.
func (s *stack) readJournals() journals {
	t := s.t
	t.Helper()
	js := journals{attemptRequest: map[string]string{}, attemptEnd: map[string]msg.State{},
		begins: map[string]int{}, answers: map[string]int{}}
	agentsID := map[string]string{} // the application's requestId -> the agent's
	cfg, _, err := controller.LoadConfig(s.ctlConfig)
	if err != nil {
		t.Fatal(err)
	}
	iterate(t, cfg.JournalDir(), func(r journal.Record) error {
		switch r.Kind {
		case ledger.KindBegin:
			var b ledger.Begin
			if err := ledger.Decode(r, &b); err != nil {
				return err
			}
			if b.Kind == "invoke" {
				js.attemptRequest[b.Attempt] = b.RequestID
				js.begins[b.RequestID]++
				agentsID[cmp.Or(b.ScopedRequestID, b.RequestID)] = b.RequestID
			}
		case ledger.KindResult:
			var res ledger.Result
			if err := ledger.Decode(r, &res); err != nil {
				return err
			}
			js.attemptEnd[res.Attempt] = res.Outcome
		case ledger.KindResolve:
			var res ledger.Resolve
			if err := ledger.Decode(r, &res); err != nil {
				return err
			}
			js.attemptEnd[res.Attempt] = res.State
		}
		return nil
	})

	// A held reservation is a finding, and findings make verify exit 1:
	// its report is read either way and its findings are judged by account.
	out, stderr, err := s.try("steward-operator", "receipts", "verify", "--store", s.store, "--json")
	if jerr := json.Unmarshal(out, &js.verify); jerr != nil || (err != nil && len(js.verify.Findings) == 0) {
		t.Fatalf("receipts verify --json: %v, %v\n%s", err, jerr, stderr)
	}
	if err := json.Unmarshal(s.run("steward-operator", "purse", "show", "dev", "--store", s.store, "--json"), &js.purse); err != nil {
		t.Fatalf("purse show --json: %v", err)
	}
	js.receipts = s.hostReceipts()
	// receipts export is run for what it says, not relied on: it refuses
	// a store of more than wire.MaxEntries receipts (a CBOR array bound).
	if _, stderr, err := s.try("steward-operator", "receipts", "export", "--store", s.store, "--out", filepath.Join(s.hostDir, "receipts.cbor")); err != nil {
		js.exportError = strings.TrimSpace(stderr)
	}

	iterate(t, filepath.Join(s.appState, "journal"), func(r journal.Record) error {
		if r.Kind != "answer" {
			return nil
		}
		var a struct {
			RequestID string `cbor:"requestId"`
		}
		if err := cbor.Unmarshal(r.Body, &a); err != nil {
			return err
		}
		// An id no begin scoped stays as the application saw it, and
		// is reported as one no client issued.
		js.answers[cmp.Or(agentsID[a.RequestID], a.RequestID)]++
		return nil
	})
	return js
}

// receiptKinds are the host records that carry a receipt (operator/hostlog/doc.go):
// answers, and since P1.5 releases before sending and refusals after
// admission.
var receiptKinds = map[string]bool{"outcome": true, "outcome.v2": true, "not-sent.v2": true, "refused": true}

// hostReceipts reads the receipt of every record of the host's journal
// that carries one (read-only, the host stopped) and verifies each against the
// store's host key.
func (s *stack) hostReceipts() []msg.Receipt {
	t := s.t
	// Read as bytes: the store is the host account's, and the key file
	// checks (ReadHybridPublicKeyFile) admit only this process's files.
	b, err := os.ReadFile(filepath.Join(s.store, "operator.pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := wire.ParseHybridPublicKey(b)
	if err != nil {
		t.Fatal(err)
	}
	ring := wire.NewKeyring(pub.Ed25519())
	var out []msg.Receipt
	iterate(t, filepath.Join(s.store, "journal"), func(r journal.Record) error {
		if !receiptKinds[r.Kind] {
			return nil
		}
		var o struct {
			Receipt []byte `cbor:"receipt"`
		}
		if err := cbor.Unmarshal(r.Body, &o); err != nil {
			return err
		}
		rc, err := msg.VerifyReceipt(o.Receipt, ring)
		if err != nil {
			return fmt.Errorf("record %d: %w", r.Seq, err)
		}
		out = append(out, rc)
		return nil
	})
	return out
}

// iterate reads every record of the journal at dir, read-only.
func iterate(t interface {
	Helper()
	Fatalf(string, ...any)
}, dir string, fn func(journal.Record) error) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("journal %s: %v", dir, err)
	}
	defer j.Close()
	if err := j.Iterate(1, fn); err != nil {
		t.Fatalf("journal %s: %v", dir, err)
	}
}
