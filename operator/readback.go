package operator

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
)

// The records an attempt's later reads go back to the journal for: its
// reservation (the request a redelivery sends, kept in the journal and
// never in memory) and the record that ended it (the answer and receipt
// inspect gives back). Each is read at its place, which the attempt
// keeps, at once (journal.ReadAt), however old.

// recordAt reads and decodes the host record at place p, one of attempt
// id's. A record `history archive` moved out is refused naming its archive.
func (s *Store) recordAt(p journal.Place, id string) (*hostlog.Record, error) {
	r, err := s.j.ReadAt(p)
	var ae *journal.ArchivedError
	if errors.As(err, &ae) {
		return nil, &archivedRefusal{fmt.Sprintf("attempt %s is archived in %s", hostlog.Trunc(id, hostlog.MaxAttemptID), ae.Archive)}
	}
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

// archivedRefusal refuses a read of an attempt whose records are
// archived: it matches views.ErrRefused and journal.ErrArchived, and says
// no more than the archive's name.
type archivedRefusal struct{ reason string }

func (e *archivedRefusal) Error() string { return views.ErrRefused.Error() + ": " + e.reason }

func (e *archivedRefusal) Unwrap() []error { return []error{views.ErrRefused, journal.ErrArchived} }

// readReserve reads an attempt's reservation from the journal, as a
// reserve.v2 (hostlog.Record.Reservation).
func (s *Store) readReserve(id string, at journal.Place) (*hostlog.ReserveV2, error) {
	rec, err := s.recordAt(at, id)
	if err != nil {
		return nil, err
	}
	return rec.Reservation(id)
}

// endRecord reads the record at place at that ended attempt id with a
// receipt (hostlog.Record.End).
func (s *Store) endRecord(at journal.Place, id string) (hostlog.OutcomeV2, error) {
	rec, err := s.recordAt(at, id)
	if err != nil {
		return hostlog.OutcomeV2{}, err
	}
	return rec.End(id)
}
