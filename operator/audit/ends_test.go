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
	a3  []byte // the signed receipt of a3, the chain's last (set by forge)
}

func newEndForgery(t *testing.T) *endForgery {
	w, key := paidWorld(t, hosttest.Opts{Fund: 100, Price: 10, RefusalPrice: 4})
	return &endForgery{w: w, key: key}
}

// forge appends what write appends (f.append), given the last receipt
// and the next ledger number, to the stopped store, and returns what
// verify says.
func (f *endForgery) forge(t *testing.T, write func(last msg.Receipt, ledger uint64)) (audit.ReceiptReport, error) {
	f.w.WithStore(t, func(s *operator.Store) {
		in, _ := s.Inspect("ctl", "a3")
		f.a3 = in.Receipt
	})
	last, _ := msg.VerifyReceipt(f.a3, wire.NewKeyring(f.w.Pub.Ed25519()))
	write(last, hosttest.NextLedger(t, f.w.Store))
	return audit.VerifyStore(f.w.Store)
}

// append writes one record to the stopped store's journal as it is, as a
// forger with the store's account could.
func (f *endForgery) append(t *testing.T, kind string, body any) {
	hosttest.Append(t, f.w.Store, f.w.Pub, kind, body)
}

// reserveA4 appends a genuine reservation of 10 for attempt a4, with the
// payer's consent to 10 for an answer and refusal for a refusal, and
// returns the receipt its end would carry (its chain link set).
func (f *endForgery) reserveA4(t *testing.T, last msg.Receipt, ledger uint64, refusal uint64) msg.Receipt {
	d := peertest.InvokeDispatch(t, "a4", "calc.evaluate", `{"expression":"1/0"}`)
	sha := peertest.RequestSHA256(d)
	consent, err := msg.SignConsent(f.w.Peer.Disp, msg.Consent{V: msg.CustodyV2, Attempt: "a4", Controller: "ctl", Principal: peertest.Agent, Application: "app",
		Operation: "calc.evaluate", RequestSHA256: sha, Charge: 10, RefusalPrice: refusal, At: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	f.append(t, hostlog.KindReserve, hostlog.Reserve{Attempt: "a4", Controller: "ctl", Grant: f.w.Grant, Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: sha, Charge: 10, Consent: consent,
		Day: utcDay(time.Now()), Ledger: ledger})
	return msg.Receipt{V: msg.ReceiptV2, Seq: last.Seq + 1, Prev: msg.ReceiptHash(f.a3), Attempt: "a4", Controller: "ctl",
		Application: "app", Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: sha, Consent: consent, At: time.Now().UnixMilli(),
		Agent: peertest.Agent}
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
		r       func(r *msg.Receipt, rec *hostlog.OutcomeV2)
	}
	for _, tc := range []struct {
		name     string
		e        edit
		want     string // a fault; "" verifies
		findings string // a finding
	}{
		{"a 4xx at the refusal price verifies", edit{4, func(*msg.Receipt, *hostlog.OutcomeV2) {}}, "", ""},
		{"the record settles another charge", edit{4, func(_ *msg.Receipt, rec *hostlog.OutcomeV2) { rec.Charge = 10 }},
			"charges 4, the record settles 10", ""},
		{"a 2xx charged below its reservation", edit{4, func(r *msg.Receipt, rec *hostlog.OutcomeV2) {
			r.Status, rec.Status, r.PriceApplied = 200, 200, msg.PriceAnswer
		}}, "a 200 answer charges 4, its reservation was 10", ""},
		{"a 4xx at the answer price", edit{4, func(r *msg.Receipt, rec *hostlog.OutcomeV2) {
			r.Charge, rec.Charge, r.BalanceAfter, r.PriceApplied = 10, 10, 60, msg.PriceAnswer
		}}, `a 422 answer charging 10 applies the "answer" price, not "refusal"`, ""},
		{"a balance that leaves out the release", edit{4, func(r *msg.Receipt, _ *hostlog.OutcomeV2) { r.BalanceAfter = 60 }},
			"balance after is 60, but the purse history of ctl gives 66", ""},
		{"a charge above the reservation", edit{4, func(r *msg.Receipt, rec *hostlog.OutcomeV2) { r.Charge, rec.Charge = 11, 11 }},
			"charges 11, the reservation was 10", ""},
		{"a refusal price the payer did not consent to", edit{0, func(*msg.Receipt, *hostlog.OutcomeV2) {}}, "",
			`charges 4 at the "refusal" price; its payer consent allows 10 for an answer and 0 for a refusal`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEndForgery(t)
			rep, err := f.forge(t, func(last msg.Receipt, ledger uint64) {
				r := f.reserveA4(t, last, ledger, tc.e.refusal)
				r.ResponseSHA256, r.Status, r.Charge, r.BalanceAfter = sum[:], 422, 4, 66
				r.Outcome, r.PriceApplied = msg.StateDefinite, msg.PriceRefusal
				rec := hostlog.OutcomeV2{Attempt: "a4", Status: 422, Body: body, Seq: r.Seq, Charge: 4, Ledger: ledger + 1}
				tc.e.r(&r, &rec)
				rec.Receipt = f.sign(t, r)
				// A forged record: written as is, not signed through the store's commitEnd.
				f.append(t, hostlog.KindOutcomeV2, rec)
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
	refusal := func(last msg.Receipt, ledger uint64, edit func(*msg.Receipt)) {
		r := msg.Receipt{V: msg.ReceiptV2, Seq: last.Seq + 1, Prev: msg.ReceiptHash(f.a3), Attempt: "a5", Controller: "ctl",
			Application: "app", Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: make([]byte, 32), BalanceAfter: 70,
			Outcome: msg.StateRefused, Reason: "the payer refused: x", PriceApplied: msg.PriceNone, At: time.Now().UnixMilli(), Agent: peertest.Agent}
		edit(&r)
		f.append(t, hostlog.KindRefused, hostlog.Refused{Attempt: "a5", Controller: "ctl", Reason: "the payer refused: x",
			Receipt: f.sign(t, r), Seq: r.Seq, Ledger: ledger - 1})
	}
	for _, tc := range []struct {
		name  string
		write func(last msg.Receipt, ledger uint64)
		want  string
	}{
		{"an honest refusal verifies", func(last msg.Receipt, ledger uint64) {
			refusal(last, ledger, func(*msg.Receipt) {})
		}, ""},
		{"a refusal that charges", func(last msg.Receipt, ledger uint64) {
			refusal(last, ledger, func(r *msg.Receipt) { r.Charge, r.BalanceAfter = 3, 67 })
		}, "a refusal receipted as refused, status 0, charge 3"},
		{"a reason other than the record's", func(last msg.Receipt, ledger uint64) {
			refusal(last, ledger, func(r *msg.Receipt) { r.Reason = "something else" })
		}, "its reason is not the record's"},
		{"a reservation after the refusal", func(last msg.Receipt, ledger uint64) {
			refusal(last, ledger, func(*msg.Receipt) {})
			f.append(t, hostlog.KindReserve, hostlog.Reserve{Attempt: "a5", Controller: "ctl", Grant: f.w.Grant, Application: "app",
				Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: make([]byte, 32), Day: utcDay(time.Now()), Ledger: ledger})
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
