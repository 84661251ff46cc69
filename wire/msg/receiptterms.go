package msg

import "fmt"

// IsAnswer reports whether status is an application's success (2xx): the
// only status charged the answer price.
func IsAnswer(status int) bool { return status >= 200 && status < 300 }

// PriceFor names the price a charge of charge applied under which
// (PriceAnswer or PriceRefusal): which, or PriceNone when nothing is
// charged.
func PriceFor(charge uint64, which string) string {
	if charge == 0 {
		return PriceNone
	}
	return which
}

// CheckTerms checks that a receipt's own fields agree. A version 2
// receipt names an outcome: an answer (definite) charges at the answer
// price for a 2xx status and at the refusal price for any other, and
// names the price it applied; every other end names its reason, and a
// refusal, a release before sending or an operator's release charges
// nothing. A version 1 receipt names none of this (it was written only for
// answers, charging the answer price or nothing). Both sides check it: the
// host's verifier and the controller that receives the receipt.
func (r *Receipt) CheckTerms() error {
	if r.V == 0 {
		if r.Outcome != "" || r.PriceApplied != "" || r.Reason != "" {
			return fmt.Errorf("a version 1 receipt names version 2 fields")
		}
		return nil
	}
	if r.V != ReceiptV2 {
		return fmt.Errorf("receipt version %d is not one this build reads", r.V)
	}
	switch r.Outcome {
	case StateDefinite:
		which := PriceRefusal
		if IsAnswer(r.Status) {
			which = PriceAnswer
		}
		if want := PriceFor(r.Charge, which); r.PriceApplied != want {
			return fmt.Errorf("a %d answer charging %d applies the %q price, not %q", r.Status, r.Charge, r.PriceApplied, want)
		}
		return nil
	case StatePerformed:
		if want := PriceFor(r.Charge, PriceAnswer); r.PriceApplied != want {
			return fmt.Errorf("a request performed with no answer charging %d applies the %q price, not %q", r.Charge, r.PriceApplied, want)
		}
	case StateRefused, StateNotSent, StateReleased:
		if r.Charge != 0 || r.PriceApplied != PriceNone {
			return fmt.Errorf("a receipt of %s charges %d at the %q price: it charges nothing", r.Outcome, r.Charge, r.PriceApplied)
		}
	default:
		return fmt.Errorf("a receipt names the outcome %q, not one of a receipt", r.Outcome)
	}
	if r.Reason == "" {
		return fmt.Errorf("a receipt of %s names no reason", r.Outcome)
	}
	return nil
}

// CheckCharge checks a receipt's charge against its payer consent c: a
// version 2 receipt charges exactly the price it says it applied (the
// consent's answer price, its refusal price, or nothing); a version 1
// receipt at most the consent's answer price.
func (r *Receipt) CheckCharge(c Consent) error {
	if r.V == 0 {
		if r.Charge > c.Charge {
			return fmt.Errorf("charges %d, more than the %d its payer consent allows", r.Charge, c.Charge)
		}
		return nil
	}
	var want uint64
	switch r.PriceApplied {
	case PriceAnswer:
		want = c.Charge
	case PriceRefusal:
		want = c.RefusalPrice
	}
	if r.Charge != want || !c.Allows(r.Charge) {
		return fmt.Errorf("charges %d at the %q price; its payer consent allows %d for an answer and %d for a refusal", r.Charge, r.PriceApplied, c.Charge, c.RefusalPrice)
	}
	return nil
}
