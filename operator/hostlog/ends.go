package hostlog

import "fmt"

// What the records of an attempt give back when the store reads them at
// their place (operator's readback): the reservation, and the end with
// its receipt, of any kind that carries one.

// Reservation is r as attempt id's reservation, a reserve.v2 (a
// first-version reserve without its request).
func (r *Record) Reservation(id string) (*ReserveV2, error) {
	var found *ReserveV2
	switch b := r.Body.(type) {
	case *ReserveV2:
		found = b
	case *Reserve:
		found = b.Upgrade()
	default:
		return nil, fmt.Errorf("journal record %d is %s, not the reservation of attempt %s", r.Seq, r.Kind, id)
	}
	if found.Attempt != id {
		return nil, fmt.Errorf("journal record %d is not the reservation of attempt %s", r.Seq, id)
	}
	return found, nil
}

// End is r as the record that ended attempt id with a receipt, of any
// kind that carries one; an outcome's answer too.
func (r *Record) End(id string) (OutcomeV2, error) {
	var out OutcomeV2
	switch b := r.Body.(type) {
	case *Outcome:
		out = *b.Upgrade(0)
	case *OutcomeV2:
		out = *b
	case *NotSentV2:
		out = OutcomeV2{Attempt: b.Attempt, Receipt: b.Receipt}
	case *Refused:
		out = OutcomeV2{Attempt: b.Attempt, Receipt: b.Receipt}
	case *Resolve:
		out = OutcomeV2{Attempt: b.Attempt, Receipt: b.Receipt}
	default:
		return OutcomeV2{}, fmt.Errorf("journal record %d is %s, not the end of attempt %s", r.Seq, r.Kind, id)
	}
	if out.Attempt != id {
		return OutcomeV2{}, fmt.Errorf("journal record %d ends attempt %s, not %s", r.Seq, out.Attempt, id)
	}
	return out, nil
}
