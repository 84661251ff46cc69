package operator

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// The records an attempt's later reads go back to the journal for: its
// reservation (the request a redelivery sends, kept in the journal and
// never in memory) and the record that ended it (the answer and receipt
// inspect gives back). Each is read by its journal sequence number, which
// the attempt keeps.

// errStop ends a journal iteration once its record is read.
var errStop = errors.New("stop")

// recordAt reads and decodes the host record at journal seq.
func (s *Store) recordAt(seq uint64) (*hostlog.Record, error) {
	var rec *hostlog.Record
	err := s.j.Iterate(seq, func(r journal.Record) error {
		var err error
		if rec, err = hostlog.Decode(r); err != nil {
			return err
		}
		if rec == nil {
			return fmt.Errorf("journal record %d is the journal's own %s record", r.Seq, r.Kind)
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("the host journal has no record %d", seq)
	}
	return rec, nil
}

// readReserve reads an attempt's reservation from the journal, as a
// reserve.v2 (a first-version one without its request).
func (s *Store) readReserve(id string, seq uint64) (*hostlog.ReserveV2, error) {
	rec, err := s.recordAt(seq)
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
		return nil, fmt.Errorf("journal record %d is not the reservation of attempt %s", seq, id)
	}
	return found, nil
}

// endRecord reads the record at journal seq that ended attempt id with a
// receipt, of any kind that carries one; an outcome's answer too.
func (s *Store) endRecord(seq uint64, id string) (hostlog.OutcomeV2, error) {
	rec, err := s.recordAt(seq)
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
