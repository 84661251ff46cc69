package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// The records an attempt's later reads go back to the journal for: its
// reservation (the request a redelivery sends, kept in the journal and
// never in memory) and the record that ended it (the answer and receipt
// inspect gives back). Each is read at its place, which the attempt
// keeps, at once (journal.ReadAt), however old.

// recordAt reads and decodes the host record at place p.
func (s *Store) recordAt(p journal.Place) (*hostlog.Record, error) {
	r, err := s.j.ReadAt(p)
	if err != nil {
		return nil, err
	}
	rec, err := hostlog.Decode(r)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("journal record %d is the journal's own %s record", r.Seq, r.Kind)
	}
	return rec, nil
}

// readReserve reads an attempt's reservation from the journal, as a
// reserve.v2 (a first-version one without its request).
func (s *Store) readReserve(id string, at journal.Place) (*hostlog.ReserveV2, error) {
	rec, err := s.recordAt(at)
	if err != nil {
		return nil, err
	}
	var found *hostlog.ReserveV2
	switch b := rec.Body.(type) {
	case *hostlog.ReserveV2:
		found = b
	case *hostlog.Reserve:
		found = b.Upgrade()
	default:
		return nil, fmt.Errorf("journal record %d is %s, not the reservation of attempt %s", rec.Seq, rec.Kind, id)
	}
	if found.Attempt != id {
		return nil, fmt.Errorf("journal record %d is not the reservation of attempt %s", at.Seq, id)
	}
	return found, nil
}

// endRecord reads the record at place at that ended attempt id with a
// receipt, of any kind that carries one; an outcome's answer too.
func (s *Store) endRecord(at journal.Place, id string) (hostlog.OutcomeV2, error) {
	rec, err := s.recordAt(at)
	if err != nil {
		return hostlog.OutcomeV2{}, err
	}
	var out hostlog.OutcomeV2
	switch b := rec.Body.(type) {
	case *hostlog.Outcome:
		out = *b.Upgrade(0)
	case *hostlog.OutcomeV2:
		out = *b
	case *hostlog.NotSentV2:
		out = hostlog.OutcomeV2{Attempt: b.Attempt, Receipt: b.Receipt}
	case *hostlog.Refused:
		out = hostlog.OutcomeV2{Attempt: b.Attempt, Receipt: b.Receipt}
	case *hostlog.Resolve:
		out = hostlog.OutcomeV2{Attempt: b.Attempt, Receipt: b.Receipt}
	default:
		return hostlog.OutcomeV2{}, fmt.Errorf("journal record %d is %s, not the end of attempt %s", rec.Seq, rec.Kind, id)
	}
	if out.Attempt != id {
		return hostlog.OutcomeV2{}, fmt.Errorf("journal record %d ends attempt %s, not %s", rec.Seq, out.Attempt, id)
	}
	return out, nil
}
