package audit

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// PointAt is, for the tests, the point a verify of the store in dir
// would carry after journal record n (findings or not), signed by sign:
// the audit run over records 1..n, its state taken there, and the mark
// of record n made from the place of record n+1, which must be in the
// same segment (a frame ends where the next begins).
func PointAt(dir string, n uint64, sign SignFunc) ([]byte, error) {
	j, pub, err := hostlog.OpenReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	a := newJournalAudit(pub)
	var st pointState
	var seg uint64
	m := j.Mark()
	stop := errors.New("stop")
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Seq == n+1 {
			if r.Place.Segment != seg {
				return fmt.Errorf("record %d starts segment %d", n+1, r.Place.Segment)
			}
			m.Seq, m.Head, m.Segment, m.End = n, r.Prev, seg, r.Place.Offset
			return stop
		}
		if err := a.record(r); err != nil {
			return err
		}
		if r.Seq == n {
			st, seg = a.state(), r.Place.Segment
		}
		return nil
	})
	if !errors.Is(err, stop) {
		return nil, fmt.Errorf("no record after %d: %v", n, err)
	}
	return encodePoint(pub, m, st, sign)
}
