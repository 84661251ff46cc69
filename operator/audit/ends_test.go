package audit_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// endForgery is a store after three answered calls (price 10, refusal
// price 4, balance 70) and the host's key, to which a test appends forged
// records that end a fourth attempt, signed as a host holding its key
// would sign them.
type endForgery struct {
	w   *hosttest.World
	key *wire.HybridSigningKey
}

func newEndForgery(t *testing.T) *endForgery {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 10, RefusalPrice: 4})
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"a1", "a2", "a3"} {
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatal(res)
		}
	}
	w.Stop()
	key, err := wire.ReadHybridKey(w.Store + "/" + keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &endForgery{w: w, key: key}
}

// forge appends what write appends, given the store, the last receipt
// and the next ledger number, and returns what verify says.
func (f *endForgery) forge(t *testing.T, write func(s *operator.Store, last msg.Receipt, ledger uint64)) (audit.ReceiptReport, error) {
	s, err := operator.Open(f.w.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, _ := s.Inspect("ctl", "a3")
	last, _ := msg.VerifyReceipt(in.Receipt, s.HostKeyring())
	s.mu.Lock()
	ledger := s.st.ledger + 1
	s.mu.Unlock()
	write(s, last, ledger)
	return s.VerifyReceipts(1)
}

// reserveA4 appends a genuine reservation of 10 for attempt a4, with the
// payer's consent to 10 for an answer and refusal for a refusal, and
// returns the receipt its end would carry (its chain link set).
func (f *endForgery) reserveA4(t *testing.T, s *operator.Store, last msg.Receipt, ledger uint64, refusal uint64) msg.Receipt {
	d := peertest.InvokeDispatch(t, "a4", "calc.evaluate", `{"expression":"1/0"}`)
	sha := peertest.RequestSHA256(d)
	consent, err := msg.SignConsent(f.w.Peer.Disp, msg.Consent{V: msg.CustodyV2, Attempt: "a4", Controller: "ctl", Application: "app",
		Operation: "calc.evaluate", RequestSHA256: sha, Charge: 10, RefusalPrice: refusal, At: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.append(hostlog.KindReserve, recReserve{Attempt: "a4", Controller: "ctl", Grant: f.w.Grant, Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: sha, Charge: 10, Consent: consent,
		Day: utcDay(time.Now()), Ledger: ledger}); err != nil {
		t.Fatal(err)
	}
	prevSigned, _ := s.Inspect("ctl", "a3")
	return msg.Receipt{V: msg.ReceiptV2, Seq: last.Seq + 1, Prev: msg.ReceiptHash(prevSigned.Receipt), Attempt: "a4", Controller: "ctl",
		Application: "app", Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: sha, Consent: consent, At: time.Now().UnixMilli()}
}

func (f *endForgery) sign(t *testing.T, r msg.Receipt) []byte {
	b, err := msg.SignReceipt(f.key.Ed25519(), r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOutcomeV2Forgeries: an outcome.v2 record is checked against its
// reservation, its own charge, the price its status applies, the payer's
// consent and the purse history; each forgery is named, and the honest
// one (a 4xx at the consented refusal price, the rest released) verifies.
func TestOutcomeV2Forgeries(t *testing.T) {
	body := []byte(`{"error":"division by zero"}`)
	sum := sha256.Sum256(body)
	type edit struct {
		refusal uint64 // the consent's refusal price
		r       func(r *msg.Receipt, rec *recOutcomeV2)
	}
	for _, tc := range []struct {
		name     string
		e        edit
		want     string // a fault; "" verifies
		findings string // a finding
	}{
		{"a 4xx at the refusal price verifies", edit{4, func(*msg.Receipt, *recOutcomeV2) {}}, "", ""},
		{"the record settles another charge", edit{4, func(_ *msg.Receipt, rec *recOutcomeV2) { rec.Charge = 10 }},
			"charges 4, the record settles 10", ""},
		{"a 2xx charged below its reservation", edit{4, func(r *msg.Receipt, rec *recOutcomeV2) {
			r.Status, rec.Status, r.PriceApplied = 200, 200, msg.PriceAnswer
		}}, "a 200 answer charges 4, its reservation was 10", ""},
		{"a 4xx at the answer price", edit{4, func(r *msg.Receipt, rec *recOutcomeV2) {
			r.Charge, rec.Charge, r.BalanceAfter, r.PriceApplied = 10, 10, 60, msg.PriceAnswer
		}}, `a 422 answer charging 10 applies the "answer" price, not "refusal"`, ""},
		{"a balance that leaves out the release", edit{4, func(r *msg.Receipt, _ *recOutcomeV2) { r.BalanceAfter = 60 }},
			"balance after is 60, but the purse history of ctl gives 66", ""},
		{"a charge above the reservation", edit{4, func(r *msg.Receipt, rec *recOutcomeV2) { r.Charge, rec.Charge = 11, 11 }},
			"charges 11, the reservation was 10", ""},
		{"a refusal price the payer did not consent to", edit{0, func(*msg.Receipt, *recOutcomeV2) {}}, "",
			`charges 4 at the "refusal" price; its payer consent allows 10 for an answer and 0 for a refusal`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEndForgery(t)
			rep, err := f.forge(t, func(s *operator.Store, last msg.Receipt, ledger uint64) {
				r := f.reserveA4(t, s, last, ledger, tc.e.refusal)
				r.ResponseSHA256, r.Status, r.Charge, r.BalanceAfter = sum[:], 422, 4, 66
				r.Outcome, r.PriceApplied = msg.StateDefinite, msg.PriceRefusal
				rec := recOutcomeV2{Attempt: "a4", Status: 422, Body: body, Seq: r.Seq, Charge: 4, Ledger: ledger + 1}
				tc.e.r(&r, &rec)
				rec.Receipt = f.sign(t, r)
				// A forged record: written as is, not signed through signReceiptLocked.
				if _, err := s.append(hostlog.KindOutcomeV2, rec); err != nil {
					t.Fatal(err)
				}
			})
			switch {
			case tc.want != "":
				if !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("want fault %q, got %v", tc.want, err)
				}
			case tc.findings != "":
				if len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0], tc.findings) {
					t.Fatalf("findings %q, want %q (%v)", rep.Findings, tc.findings, err)
				}
			case err != nil || rep.Receipts != 4 || rep.Purses[0].Balance != 66 || rep.Purses[0].Charged != 34:
				t.Fatalf("%+v %v", rep, err)
			}
		})
	}
}

// TestRefusedRecordForgeries: a refused record's receipt charges
// nothing, says refused with its reason, and belongs to an attempt that
// was never reserved, before or after it.
func TestRefusedRecordForgeries(t *testing.T) {
	var f *endForgery
	refusal := func(s *operator.Store, last msg.Receipt, ledger uint64, edit func(*msg.Receipt)) {
		prev, _ := s.Inspect("ctl", "a3")
		r := msg.Receipt{V: msg.ReceiptV2, Seq: last.Seq + 1, Prev: msg.ReceiptHash(prev.Receipt), Attempt: "a5", Controller: "ctl",
			Application: "app", Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: make([]byte, 32), BalanceAfter: 70,
			Outcome: msg.StateRefused, Reason: "the payer refused: x", PriceApplied: msg.PriceNone, At: time.Now().UnixMilli()}
		edit(&r)
		if _, err := s.append(hostlog.KindRefused, recRefused{Attempt: "a5", Controller: "ctl", Reason: "the payer refused: x",
			Receipt: f.sign(t, r), Seq: r.Seq, Ledger: ledger - 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		write func(s *operator.Store, last msg.Receipt, ledger uint64)
		want  string
	}{
		{"an honest refusal verifies", func(s *operator.Store, last msg.Receipt, ledger uint64) {
			refusal(s, last, ledger, func(*msg.Receipt) {})
		}, ""},
		{"a refusal that charges", func(s *operator.Store, last msg.Receipt, ledger uint64) {
			refusal(s, last, ledger, func(r *msg.Receipt) { r.Charge, r.BalanceAfter = 3, 67 })
		}, "a refusal receipted as refused, status 0, charge 3"},
		{"a reason other than the record's", func(s *operator.Store, last msg.Receipt, ledger uint64) {
			refusal(s, last, ledger, func(r *msg.Receipt) { r.Reason = "something else" })
		}, "its reason is not the record's"},
		{"a reservation after the refusal", func(s *operator.Store, last msg.Receipt, ledger uint64) {
			refusal(s, last, ledger, func(*msg.Receipt) {})
			if _, err := s.append(hostlog.KindReserve, recReserve{Attempt: "a5", Controller: "ctl", Grant: f.w.Grant, Application: "app",
				Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: make([]byte, 32), Day: utcDay(time.Now()), Ledger: ledger}); err != nil {
				t.Fatal(err)
			}
		}, "attempt a5 reserved twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f = newEndForgery(t)
			rep, err := f.forge(t, tc.write)
			if tc.want == "" {
				if err != nil || rep.Receipts != 4 || rep.Purses[0].Balance != 70 {
					t.Fatalf("%+v %v", rep, err)
				}
				return
			}
			if !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want fault %q, got %v", tc.want, err)
			}
		})
	}
}

// TestChargesAddUp: what a purse's history charges must be what its
// receipts charge plus what its open reservations hold; one credit off
// either way is named.
func TestChargesAddUp(t *testing.T) {
	a := newJournalAudit(nil)
	a.reserves["held"] = &auditReserve{rec: recReserve{Attempt: "held", Controller: "ctl", Charge: 5}}
	a.receipts = []chainReceipt{{r: msg.Receipt{Controller: "ctl", Charge: 7}}, {r: msg.Receipt{Controller: "other", Charge: 100}}}
	if err := a.checkCharged(audit.PurseReport{Controller: "ctl", Charged: 12}); err != nil {
		t.Fatal(err)
	}
	for _, charged := range []uint64{11, 13} {
		err := a.checkCharged(audit.PurseReport{Controller: "ctl", Charged: charged})
		want := "purse of ctl: its history charges " + map[uint64]string{11: "11", 13: "13"}[charged] + ", but its receipts charge 7 and its open reservations hold 5"
		if !errors.Is(err, hostlog.ErrReceiptFault) || !strings.Contains(err.Error(), want) {
			t.Fatalf("charged %d: %v, want %q", charged, err, want)
		}
	}
}
