package msg

import "testing"

// TestReceiptTerms: each outcome's own terms, one field off each way.
func TestReceiptTerms(t *testing.T) {
	v2 := func(o State, status int, charge uint64, price, reason string) Receipt {
		return Receipt{V: ReceiptV2, Outcome: o, Status: status, Charge: charge, PriceApplied: price, Reason: reason}
	}
	for _, tc := range []struct {
		r    Receipt
		want string
	}{
		{Receipt{Status: 200, Charge: 5}, ""},
		{Receipt{Status: 200, Charge: 5, Outcome: StateDefinite}, "a version 1 receipt names version 2 fields"},
		{Receipt{V: 3}, "receipt version 3 is not one this build reads"},
		{v2(StateDefinite, 200, 5, PriceAnswer, ""), ""},
		{v2(StateDefinite, 299, 0, PriceNone, ""), ""},
		{v2(StateDefinite, 300, 2, PriceRefusal, ""), ""},
		{v2(StateDefinite, 199, 2, PriceAnswer, ""), `a 199 answer charging 2 applies the "answer" price, not "refusal"`},
		{v2(StateDefinite, 404, 0, PriceRefusal, ""), `a 404 answer charging 0 applies the "refusal" price, not "none"`},
		{v2(StateRefused, 0, 0, PriceNone, "the payer refused: x"), ""},
		{v2(StateRefused, 0, 1, PriceNone, "the payer refused: x"), `a receipt of refused charges 1 at the "none" price: it charges nothing`},
		{v2(StateNotSent, 0, 0, PriceNone, ""), "a receipt of not-sent names no reason"},
		{v2(StateReleased, 0, 0, PriceNone, "released by the operator: x"), ""},
		{v2(StatePerformed, 0, 5, PriceAnswer, "performed, no answer recorded"), ""},
		{v2(StatePerformed, 0, 5, PriceRefusal, "performed"), `a request performed with no answer charging 5 applies the "refusal" price, not "answer"`},
		{v2(StateUncertain, 0, 0, PriceNone, "x"), `a receipt names the outcome "uncertain", not one of a receipt`},
	} {
		err := tc.r.CheckTerms()
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.want)
		}
	}
}

// TestReceiptCharge: a version 2 receipt charges exactly the consent's
// price it applied; a version 1 receipt at most the answer price.
func TestReceiptCharge(t *testing.T) {
	c := Consent{Charge: 5, RefusalPrice: 2}
	for _, tc := range []struct {
		r    Receipt
		want string
	}{
		{Receipt{Charge: 5}, ""},
		{Receipt{Charge: 4}, ""},
		{Receipt{Charge: 6}, "charges 6, more than the 5 its payer consent allows"},
		{Receipt{V: ReceiptV2, Charge: 5, PriceApplied: PriceAnswer}, ""},
		{Receipt{V: ReceiptV2, Charge: 2, PriceApplied: PriceRefusal}, ""},
		{Receipt{V: ReceiptV2, Charge: 0, PriceApplied: PriceNone}, ""},
		{Receipt{V: ReceiptV2, Charge: 4, PriceApplied: PriceAnswer}, `charges 4 at the "answer" price; its payer consent allows 5 for an answer and 2 for a refusal`},
		{Receipt{V: ReceiptV2, Charge: 3, PriceApplied: PriceRefusal}, `charges 3 at the "refusal" price; its payer consent allows 5 for an answer and 2 for a refusal`},
		{Receipt{V: ReceiptV2, Charge: 2, PriceApplied: PriceNone}, `charges 2 at the "none" price; its payer consent allows 5 for an answer and 2 for a refusal`},
	} {
		err := tc.r.CheckCharge(c)
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.want)
		}
	}
}
