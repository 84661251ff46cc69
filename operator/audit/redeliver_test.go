package audit_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// TestRedeliveredReceiptNamesResolver: the receipt of a redelivery's
// answer names the resolver of the last redeliver record before it, and a
// first delivery's receipt names none; receipts verify refuses either
// forged.
func TestRedeliveredReceiptNamesResolver(t *testing.T) {
	body := []byte(`{"result":2}`)
	sum := sha256.Sum256(body)
	for _, tc := range []struct {
		name       string
		redeliver  []string // the By of each redeliver record before the outcome
		resolvedBy string   // the receipt's
		want       string   // a fault; "" verifies
	}{
		{"a redelivery names its resolver", []string{"uid:7"}, "uid:7", ""},
		{"the last of two redeliveries", []string{"uid:7", "uid:8"}, "uid:8", ""},
		{"a redelivery's receipt names none", []string{"uid:7"}, "",
			`resolved by ""; the last redeliver record of attempt a4 says "uid:7"`},
		{"another resolver", []string{"uid:7"}, "uid:9",
			`resolved by "uid:9"; the last redeliver record of attempt a4 says "uid:7"`},
		{"an earlier redelivery's resolver", []string{"uid:7", "uid:8"}, "uid:7",
			`resolved by "uid:7"; the last redeliver record of attempt a4 says "uid:8"`},
		{"a first delivery names a resolver", nil, "uid:7",
			`resolved by "uid:7", but attempt a4 was never redelivered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEndForgery(t)
			rep, err := f.forge(t, func(last msg.Receipt, ledger uint64) {
				r := f.reserveA4(t, last, ledger, 0)
				for _, by := range tc.redeliver {
					f.append(t, hostlog.KindRedeliver, hostlog.Redeliver{Attempt: "a4", By: by, Reason: "the application was restarted"})
				}
				r.ResponseSHA256, r.Status, r.Charge, r.BalanceAfter = sum[:], 200, 10, 60
				r.Outcome, r.PriceApplied, r.ResolvedBy = msg.StateDefinite, msg.PriceAnswer, tc.resolvedBy
				// A forged record: written as is, not signed through the store's commitEnd.
				f.append(t, hostlog.KindOutcomeV2, hostlog.OutcomeV2{Attempt: "a4", Status: 200, Body: body, Receipt: f.sign(t, r),
					Seq: r.Seq, Charge: 10, Ledger: ledger + 1})
			})
			if tc.want == "" {
				if err != nil || rep.Receipts != 4 || rep.Purses[0].Balance != 60 {
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
