package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// receiptsFixture is a stopped host that made three paid calls (a1..a3 at
// 10 each from a purse of 100), its honest export, and what an attacker
// holding the host key forges with: that key, and the controller's real
// dispatch key only where a test needs a genuine consent.
type receiptsFixture struct {
	w        *hosttest.World
	host     *wire.HybridSigningKey
	honest   []byte // the exported file
	hostPub  string // operator.pub
	ctlKeys  string // the controller's public keys file (controller.pub)
	receipts []msg.Receipt
}

func newReceiptsFixture(t *testing.T) *receiptsFixture {
	w, key := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	fx := &receiptsFixture{w: w, host: key, hostPub: filepath.Join(w.Store, hostlog.PubFile), ctlKeys: filepath.Join(w.Dir, "controller.pub")}
	if err := os.WriteFile(fx.ctlKeys, w.Peer.KeysFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	w.WithStore(t, func(s *operator.Store) {
		var err error
		if fx.honest, err = audit.ExportStore(s.Dir()); err != nil {
			t.Fatal(err)
		}
	})
	for _, signed := range fx.file(t).Receipts {
		r, err := msg.VerifyReceipt(signed, wire.NewKeyring(key.Public().Ed25519()))
		if err != nil {
			t.Fatal(err)
		}
		fx.receipts = append(fx.receipts, r)
	}
	if len(fx.receipts) != 3 || fx.receipts[2].Consent == nil {
		t.Fatalf("fixture: %d receipts", len(fx.receipts))
	}
	return fx
}

// file is a fresh copy of the honest export.
func (fx *receiptsFixture) file(t *testing.T) msg.ReceiptsFile {
	var f msg.ReceiptsFile
	if err := wire.Unmarshal(fx.honest, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// consent signs c with the controller's real dispatch key.
func (fx *receiptsFixture) consent(t *testing.T, c msg.Consent) []byte {
	b, err := msg.SignConsent(fx.w.Peer.Disp, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// a4 is the receipt a forger appends after receipt 3: attempt a4 charged
// 10 under a genuine consent for exactly that; edit makes it a forgery.
func (fx *receiptsFixture) a4(t *testing.T) msg.Receipt {
	last := fx.receipts[2]
	d := peertest.InvokeDispatch(t, "a4", "calc.evaluate", `{"expression":"1+1"}`)
	r := last
	r.Seq, r.Attempt, r.RequestSHA256, r.Charge, r.BalanceAfter = 4, "a4", peertest.RequestSHA256(d), 10, last.BalanceAfter-10
	r.Consent = fx.consent(t, fx.consentFor(r, 10))
	return r
}

// consentFor is the consent a controller would sign for r at charge.
func (fx *receiptsFixture) consentFor(r msg.Receipt, charge uint64) msg.Consent {
	return msg.Consent{Attempt: r.Attempt, Controller: r.Controller, Principal: r.Agent, Application: r.Application, Operation: r.Operation,
		RequestSHA256: r.RequestSHA256, Charge: charge, At: time.Now().UnixMilli()}
}

// appendSigned appends r to f, linked to f's last receipt and signed with
// signer, and a checkpoint over it signed with the host key, as a forger
// holding that key would: the chain and its coverage verify.
func (fx *receiptsFixture) appendSigned(t *testing.T, f *msg.ReceiptsFile, r msg.Receipt, signer *wire.SigningKey) {
	r.Prev = msg.ReceiptHash(f.Receipts[len(f.Receipts)-1])
	signed, err := msg.SignReceipt(signer, r)
	if err != nil {
		t.Fatal(err)
	}
	f.Receipts = append(f.Receipts, signed)
	fx.checkpoint(t, f, r.Seq)
}

// checkpoint appends a checkpoint over receipt seq of f, signed with the host key.
func (fx *receiptsFixture) checkpoint(t *testing.T, f *msg.ReceiptsFile, seq uint64) {
	cp, err := msg.SignCheckpoint(fx.host, msg.Checkpoint{Seq: seq, Head: msg.ReceiptHash(f.Receipts[seq-1]), At: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	f.Checkpoints = append(f.Checkpoints, cp)
}

// verifyFile runs `receipts verify --file` on f with args, returning the
// exit code and what it printed.
func (fx *receiptsFixture) verifyFile(t *testing.T, f msg.ReceiptsFile, args ...string) (int, string, string) {
	b, err := wire.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "receipts.cbor")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return hosttest.RunCLI(append([]string{"receipts", "verify", "--file", path}, args...)...)
}

func wantOutput(t *testing.T, what, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Fatalf("%s does not say %q:\n%s", what, p, got)
		}
	}
}

// fileForgery is one receipt a forger appends after receipt 3 of the
// honest file: a4 as edit makes it, and the finding verify names.
type fileForgery struct {
	name string
	edit func(t *testing.T, r *msg.Receipt)
	want string // the finding; "" verifies
}

// fileForgeries are TestReceiptsFileForgeries' receipts appended to the
// honest file of fx, whose host key's Ed25519 half is hostEd.
func fileForgeries(fx *receiptsFixture, hostEd *wire.SigningKey) []fileForgery {
	return []fileForgery{
		{"a consented receipt appended verifies", func(*testing.T, *msg.Receipt) {}, ""},
		{"a free receipt needs no consent", func(_ *testing.T, r *msg.Receipt) { r.Charge, r.Consent, r.PriceApplied = 0, nil, msg.PriceNone }, ""},
		{"a version 1 charge below the consent's", func(_ *testing.T, r *msg.Receipt) {
			r.V, r.Outcome, r.PriceApplied, r.Charge = 0, "", "", 9
		}, ""},
		{"a version 2 charge below the consent's answer price", func(_ *testing.T, r *msg.Receipt) { r.Charge = 9 },
			`receipt 4 (file entry 4): charges 9 at the "answer" price; its payer consent allows 10 for an answer and 0 for a refusal`},
		{"a 4xx at the consented refusal price verifies", func(t *testing.T, r *msg.Receipt) {
			c := fx.consentFor(*r, 10)
			c.RefusalPrice = 3
			r.Consent, r.Status, r.Charge, r.PriceApplied = fx.consent(t, c), 422, 3, msg.PriceRefusal
		}, ""},
		{"a 4xx at a refusal price the payer did not consent to", func(t *testing.T, r *msg.Receipt) {
			r.Status, r.Charge, r.PriceApplied = 422, 3, msg.PriceRefusal
		}, `receipt 4 (file entry 4): charges 3 at the "refusal" price; its payer consent allows 10 for an answer and 0 for a refusal`},
		{"no consent", func(_ *testing.T, r *msg.Receipt) { r.Consent = nil }, "receipt 4 (file entry 4): charges 10 with no payer consent"},
		{"a consent reused from another attempt", func(_ *testing.T, r *msg.Receipt) { r.Consent = fx.receipts[2].Consent },
			"receipt 4 (file entry 4): its payer consent already paid for receipt 3"},
		{"a second receipt of one attempt", func(t *testing.T, r *msg.Receipt) {
			a3 := fx.receipts[2]
			r.Attempt, r.RequestSHA256 = a3.Attempt, a3.RequestSHA256
			r.Consent = fx.consent(t, fx.consentFor(*r, 10)) // genuine, signed again: other bytes
		}, "receipt 4 (file entry 4): attempt a3 was already paid for by receipt 3"},
		{"a consent for another attempt", func(t *testing.T, r *msg.Receipt) {
			c := fx.consentFor(*r, 10)
			c.Attempt = "a5"
			r.Consent = fx.consent(t, c)
		}, `receipt 4 (file entry 4): its payer consent is for attempt "a5", not "a4"`},
		{"a consent for another request hash", func(t *testing.T, r *msg.Receipt) {
			c := fx.consentFor(*r, 10)
			c.RequestSHA256 = fx.receipts[2].RequestSHA256
			r.Consent = fx.consent(t, c)
		}, "receipt 4 (file entry 4): its payer consent is for request hash "},
		{"a consent for another operation", func(t *testing.T, r *msg.Receipt) {
			c := fx.consentFor(*r, 10)
			c.Operation = "units.convert"
			r.Consent = fx.consent(t, c)
		}, `receipt 4 (file entry 4): its payer consent is for operation "units.convert", not "calc.evaluate"`},
		{"a consent one below the charge", func(t *testing.T, r *msg.Receipt) { r.Consent = fx.consent(t, fx.consentFor(*r, 9)) },
			"receipt 4 (file entry 4): charges 10, more than the 9 its payer consent allows"},
		{"a consent the host signed itself", func(t *testing.T, r *msg.Receipt) {
			r.Consent, _ = msg.SignConsent(hostEd, fx.consentFor(*r, 10))
		}, "receipt 4 (file entry 4): payer consent: " + wire.ErrUnknownKID.Error()},
	}
}

// TestReceiptsFileForgeries forges receipt files as a host holding its own
// key would, with the real signing code, and checks that verify, given
// the controller's keys, names each forgery (exit 1), and passes the
// honest file and forgeries the payer did consent to (exit 0).
func TestReceiptsFileForgeries(t *testing.T) {
	fx := newReceiptsFixture(t)
	hostEd := fx.host.Ed25519()
	keys := []string{"--host-key", fx.hostPub, "--controller-keys", fx.ctlKeys}
	t.Run("honest", func(t *testing.T) {
		code, out, errs := fx.verifyFile(t, fx.file(t), keys...)
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		wantOutput(t, "the report", out, "3 receipts verified", "consents of controller ctl checked against its dispatch key "+fx.w.Peer.Disp.Public().KID().String()+": 3 receipts")
		if strings.Contains(out, "finding") || strings.Contains(out, "NOT checked") {
			t.Fatalf("honest file: %s", out)
		}
	})
	cases := fileForgeries(fx, hostEd)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fx.file(t)
			r := fx.a4(t)
			tc.edit(t, &r)
			fx.appendSigned(t, &f, r, hostEd)
			code, out, errs := fx.verifyFile(t, f, keys...)
			if tc.want == "" {
				if code != cli.ExitOK || strings.Contains(out, "finding") {
					t.Fatalf("exit %d: %s%s", code, out, errs)
				}
				return
			}
			if code != cli.ExitFailure {
				t.Fatalf("exit %d, want %d: %s%s", code, cli.ExitFailure, out, errs)
			}
			wantOutput(t, "stdout", out, "finding: "+tc.want)
			wantOutput(t, "stderr", errs, "steward-operator receipts verify: receipt fault: 1 finding: "+tc.want)
			if strings.Count(errs, "\n") != 1 {
				t.Fatalf("stderr is not one line: %q", errs)
			}
			// without the controller's keys the same file is not passed
			// silently: the report says its consents were not checked
			code, out, _ = fx.verifyFile(t, f, "--host-key", fx.hostPub)
			if code != cli.ExitOK {
				t.Fatalf("without --controller-keys: exit %d", code)
			}
			wantOutput(t, "stdout without --controller-keys", out, "consents of controller ctl NOT checked (no --controller-keys for it): 4 receipts")
		})
	}
	t.Run("every finding is listed", func(t *testing.T) {
		f := fx.file(t)
		r := fx.a4(t)
		r.Consent = nil
		fx.appendSigned(t, &f, r, hostEd)
		r5 := r
		r5.Seq, r5.Attempt, r5.Consent = 5, "a5", fx.receipts[1].Consent
		fx.appendSigned(t, &f, r5, hostEd)
		code, out, errs := fx.verifyFile(t, f, keys...)
		if code != cli.ExitFailure {
			t.Fatalf("exit %d", code)
		}
		wantOutput(t, "stdout", out, "finding: receipt 4 (file entry 4): charges 10 with no payer consent",
			"finding: receipt 5 (file entry 5): its payer consent already paid for receipt 2")
		wantOutput(t, "stderr", errs, "2 findings, the first: receipt 4")
	})
	t.Run("a receipt signed by another key", func(t *testing.T) {
		other, _ := wire.GenerateSigningKey()
		f := fx.file(t)
		fx.appendSigned(t, &f, fx.a4(t), other)
		code, _, errs := fx.verifyFile(t, f, keys...)
		if code != cli.ExitFailure {
			t.Fatalf("exit %d", code)
		}
		wantOutput(t, "stderr", errs, "receipt (file entry 4): receipt: "+wire.ErrUnknownKID.Error())
	})
	t.Run("a file of another host", func(t *testing.T) {
		other, _ := wire.GenerateHybridKey()
		otherPub := filepath.Join(t.TempDir(), "other.pub")
		os.WriteFile(otherPub, other.Public().MarshalCOSEKey(), 0o644)
		code, _, errs := fx.verifyFile(t, fx.file(t), "--host-key", otherPub)
		if code != cli.ExitFailure {
			t.Fatalf("exit %d", code)
		}
		wantOutput(t, "stderr", errs, "is not the pinned key "+other.Public().KID().String())
	})
}

// TestReceiptsFileTruncated drops the last receipt and its checkpoint as a
// host holding its key would (re-signing a checkpoint over the new last
// receipt). The file alone still verifies: verify cannot know receipts it
// was not shown. What it does is name the last receipt, its head and the
// checkpoint over it, which whoever recorded receipt 3 sees fall short.
func TestReceiptsFileTruncated(t *testing.T) {
	fx := newReceiptsFixture(t)
	honest := fx.file(t)
	head2, head3 := msg.ReceiptHash(honest.Receipts[1]), msg.ReceiptHash(honest.Receipts[2])
	hex := hex.EncodeToString
	t.Run("honest", func(t *testing.T) {
		code, out, errs := fx.verifyFile(t, honest, "--host-key", fx.hostPub)
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		wantOutput(t, "stdout", out, "last receipt 3, head "+hex(head3), "checkpoint at receipt 3, head "+hex(head3))
	})
	t.Run("last receipt and its checkpoint dropped", func(t *testing.T) {
		f := honest
		f.Receipts, f.Checkpoints = f.Receipts[:2], nil
		fx.checkpoint(t, &f, 2)
		code, out, errs := fx.verifyFile(t, f, "--host-key", fx.hostPub, "--controller-keys", fx.ctlKeys)
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		wantOutput(t, "stdout", out, "last receipt 2, head "+hex(head2), "checkpoint at receipt 2, head "+hex(head2))
		if strings.Contains(out, hex(head3)) {
			t.Fatalf("a truncated file names the dropped head: %s", out)
		}
	})
	t.Run("last receipt dropped, its checkpoint kept", func(t *testing.T) {
		f := honest
		f.Receipts = f.Receipts[:2]
		code, _, errs := fx.verifyFile(t, f, "--host-key", fx.hostPub)
		if code != cli.ExitFailure {
			t.Fatalf("exit %d", code)
		}
		wantOutput(t, "stderr", errs, "covers receipt 3, but there are 2 receipts")
	})
	t.Run("the last checkpoint dropped", func(t *testing.T) {
		f := honest
		f.Checkpoints = nil
		fx.checkpoint(t, &f, 2)
		code, out, _ := fx.verifyFile(t, f, "--host-key", fx.hostPub)
		if code != cli.ExitOK {
			t.Fatalf("exit %d", code)
		}
		wantOutput(t, "stdout", out, "last receipt 3, head "+hex(head3), "checkpoint at receipt 2, head "+hex(head2),
			"receipts 3..3: not yet covered by a checkpoint")
	})
}

// TestReceiptsFileRefusedInput: what verify refuses to run on (exit 2),
// each with its one line.
func TestReceiptsFileRefusedInput(t *testing.T) {
	fx := newReceiptsFixture(t)
	t.Run("no host key", func(t *testing.T) {
		code, out, errs := fx.verifyFile(t, fx.file(t))
		want := "steward-operator receipts verify: usage: --host-key FILE is required with --file: the file's own key proves nothing about who made it\n"
		if code != cli.ExitRefused || errs != want || out != "" {
			t.Fatalf("exit %d, stderr %q, stdout %q; want %d, %q", code, errs, out, cli.ExitRefused, want)
		}
		if _, err := audit.VerifyFile(fx.honest, nil); !errors.Is(err, audit.ErrRefused) || !strings.Contains(err.Error(), "the file's own key proves nothing") {
			t.Fatalf("library without a host key: %v", err)
		}
	})
	t.Run("controller without its keys", func(t *testing.T) {
		code, _, errs := fx.verifyFile(t, fx.file(t), "--host-key", fx.hostPub, "--controller", "ctl")
		if code != cli.ExitRefused || !strings.Contains(errs, "--controller names whose --controller-keys are given; none were") {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
	t.Run("not a controller keys file", func(t *testing.T) {
		code, _, errs := fx.verifyFile(t, fx.file(t), "--host-key", fx.hostPub, "--controller-keys", fx.hostPub)
		if code != cli.ExitRefused || !strings.Contains(errs, "controller keys "+fx.hostPub+": ") {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
	t.Run("file keys with a store", func(t *testing.T) {
		code, _, errs := hosttest.RunCLI("receipts", "verify", "--store", fx.w.Store, "--host-key", fx.hostPub)
		if code != cli.ExitRefused || !strings.Contains(errs, "a store verifies against the keys it pinned") {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
	t.Run("two controllers, keys for which unnamed", func(t *testing.T) {
		f := fx.file(t)
		r := fx.a4(t)
		r.Controller, r.Charge, r.Consent, r.PriceApplied = "c2", 0, nil, msg.PriceNone
		fx.appendSigned(t, &f, r, fx.host.Ed25519())
		code, _, errs := fx.verifyFile(t, f, "--host-key", fx.hostPub, "--controller-keys", fx.ctlKeys)
		if code != cli.ExitRefused || !strings.Contains(errs, "the file holds receipts of 2 controllers ([ctl c2]): name the one whose keys were given") {
			t.Fatalf("exit %d: %s", code, errs)
		}
		code, out, errs := fx.verifyFile(t, f, "--host-key", fx.hostPub, "--controller-keys", fx.ctlKeys, "--controller", "ctl")
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		wantOutput(t, "stdout", out, "consents of controller ctl checked", "consents of controller c2 NOT checked (no --controller-keys for it): 1 receipts")
	})
}

// reserve appends a reservation of 10 for a4 with consent to the stopped
// store, and with answered its outcome and receipt, and with uncertain an
// uncertain record of that detail; it returns the reservation's record.
func (fx *receiptsFixture) reserve(t *testing.T, consent func(msg.Receipt) []byte, answered bool, uncertain string) uint64 {
	store, pub := fx.w.Store, fx.w.Pub
	ledger := hosttest.NextLedger(t, store) // the store's ledger, plus 1
	r := fx.a4(t)
	r.Consent = consent(r)
	seq := hosttest.Append(t, store, pub, hostlog.KindReserve, hostlog.Reserve{Attempt: "a4", Controller: "ctl", Grant: fx.w.Grant, Application: r.Application,
		Operation: r.Operation, Kind: r.Kind, RequestSHA256: r.RequestSHA256, Charge: r.Charge, Consent: r.Consent,
		Day: utcDay(time.Now()), Ledger: ledger})
	if uncertain != "" {
		hosttest.Append(t, store, pub, hostlog.KindUncertain, hostlog.Uncertain{Attempt: "a4", Detail: uncertain})
	}
	if answered {
		body := []byte(`{}`)
		sum := sha256.Sum256(body)
		r.ResponseSHA256, r.Status = sum[:], 200
		var f msg.ReceiptsFile
		wire.Unmarshal(fx.honest, &f)
		r.Prev = msg.ReceiptHash(f.Receipts[2])
		signed, _ := msg.SignReceipt(fx.host.Ed25519(), r)
		hosttest.Append(t, store, pub, hostlog.KindOutcome, hostlog.Outcome{Attempt: "a4", Status: 200, Body: body, Receipt: signed, Seq: 4, Ledger: ledger})
	}
	return seq
}

// verifyStore runs `receipts verify` on the store.
func (fx *receiptsFixture) verifyStore() (int, string, string) {
	return hosttest.RunCLI("receipts", "verify", "--store", fx.w.Store)
}

// TestReceiptsStoreReservations forges reservations into a stopped store's
// journal with the real record code: every reservation's consent is
// checked, outcome or not, and every one still held is a finding.
func TestReceiptsStoreReservations(t *testing.T) {
	genuine := func(fx *receiptsFixture, t *testing.T) func(msg.Receipt) []byte {
		return func(r msg.Receipt) []byte { return fx.consent(t, fx.consentFor(r, r.Charge)) }
	}
	t.Run("honest", func(t *testing.T) {
		fx := newReceiptsFixture(t)
		fx.reserve(t, genuine(fx, t), true, "")
		code, out, errs := fx.verifyStore()
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		wantOutput(t, "stdout", out, "4 receipts verified", "consents of controller ctl checked against its dispatch key")
	})
	t.Run("a reservation still held", func(t *testing.T) {
		fx := newReceiptsFixture(t)
		seq := fx.reserve(t, genuine(fx, t), false, "the application's socket closed mid-answer")
		want := "reservation of attempt a4 (journal record " + itoa(seq) + "): 10 charged without a receipt, still held (the application's socket closed mid-answer)"
		code, out, errs := fx.verifyStore()
		if code != cli.ExitFailure {
			t.Fatalf("exit %d: %s", code, errs)
		}
		wantOutput(t, "stdout", out, "finding: "+want, "purse ctl: funded 100, charged 40, balance 60")
		wantOutput(t, "stderr", errs, "1 finding: "+want)
		// the receipts there are still export: the held charge has none
		fx.w.WithStore(t, func(s *operator.Store) {
			if _, err := audit.ExportStore(s.Dir()); err != nil {
				t.Fatalf("export with a held reservation: %v", err)
			}
		})
	})
	t.Run("a held reservation's consent for another request", func(t *testing.T) {
		fx := newReceiptsFixture(t)
		seq := fx.reserve(t, func(r msg.Receipt) []byte {
			c := fx.consentFor(r, 10)
			c.RequestSHA256 = fx.receipts[0].RequestSHA256
			return fx.consent(t, c)
		}, false, "")
		code, out, _ := fx.verifyStore()
		if code != cli.ExitFailure {
			t.Fatalf("exit %d", code)
		}
		wantOutput(t, "stdout", out,
			"finding: reservation of attempt a4 (journal record "+itoa(seq)+"): its payer consent is for request hash ",
			"finding: reservation of attempt a4 (journal record "+itoa(seq)+"): 10 charged without a receipt, still held (no outcome recorded)")
	})
	t.Run("a receipted reservation without consent", func(t *testing.T) {
		fx := newReceiptsFixture(t)
		seq := fx.reserve(t, func(msg.Receipt) []byte { return nil }, true, "")
		want := "reservation of attempt a4 (journal record " + itoa(seq) + "): holds 10 with no payer consent"
		code, _, errs := fx.verifyStore()
		if code != cli.ExitFailure || errs != "steward-operator receipts verify: receipt fault: 1 finding: "+want+"\n" {
			t.Fatalf("exit %d: %q", code, errs)
		}
		fx.w.WithStore(t, func(s *operator.Store) {
			if _, err := audit.ExportStore(s.Dir()); !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), want) {
				t.Fatalf("export of an unconsented charge: %v", err)
			}
		})
	})
	t.Run("a receipted reservation above its consent", func(t *testing.T) {
		fx := newReceiptsFixture(t)
		fx.reserve(t, func(r msg.Receipt) []byte { return fx.consent(t, fx.consentFor(r, 9)) }, true, "")
		code, _, errs := fx.verifyStore()
		if code != cli.ExitFailure || !strings.Contains(errs, "charges 10, more than the 9 its payer consent allows") {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
	t.Run("a consent the host signed itself", func(t *testing.T) {
		fx := newReceiptsFixture(t)
		fx.reserve(t, func(r msg.Receipt) []byte {
			b, _ := msg.SignConsent(fx.host.Ed25519(), fx.consentFor(r, 10))
			return b
		}, true, "")
		code, _, errs := fx.verifyStore()
		if code != cli.ExitFailure || !strings.Contains(errs, "payer consent: "+wire.ErrUnknownKID.Error()) {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// utcDay is the day number a reservation counts on: the UTC day (unix ms
// / 86,400,000), as hostlog's doc gives reserve's day and the store
// computes it.
func utcDay(t time.Time) int64 { return t.UnixMilli() / 86_400_000 }

// TestVerifyRefusesWhatTheTableDoesNot: a record of a kind hostlog's table
// does not name, or a body with a key its type lacks, stops `receipts
// verify` and `receipts export` as a receipt fault naming the record (the
// journal read on its own: no store is opened, whose replay refuses it
// too). hostlog's TestReplayAndVerifyRefuseWhatTheTableDoesNot checks the
// decoding, operator's TestReplayRefusesWhatTheTableDoesNot the replay.
func TestVerifyRefusesWhatTheTableDoesNot(t *testing.T) {
	cases := []struct {
		name, kind string
		body       any
		vfy        string
	}{
		{"unknown kind", "grant-renew", hostlog.GrantRevoke{ID: "g"}, `: unknown record kind "grant-renew"`},
		{"unknown key", hostlog.KindPurseFreeze, map[string]any{"controller": "ctl", "why": "x"},
			`: wire: malformed: cbor decode: cbor: found unknown field at map element index 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := hosttest.NewWorld(t, hosttest.Opts{})
			seq := hosttest.Append(t, w.Store, w.Pub, tc.kind, tc.body)
			wantVerify := fmt.Sprintf("receipt fault: journal record %d%s", seq, tc.vfy)
			_, err := audit.VerifyStore(w.Store)
			if !errors.Is(err, hostlog.ErrReceiptFault) || err.Error() != wantVerify {
				t.Errorf("verify: %v\nwant: %s", err, wantVerify)
			}
			if _, err := audit.ExportStore(w.Store); err == nil || err.Error() != wantVerify {
				t.Errorf("export: %v\nwant: %s", err, wantVerify)
			}
		})
	}
}
