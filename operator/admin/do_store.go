package admin

import (
	"path/filepath"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
)

// doStore runs the operations on the store as a whole: a history
// snapshot, a history archive and a clock accept.
func doStore(s *operator.Store, req Request) (Reply, error) {
	var rep Reply
	switch req.Op {
	case OpHistorySnapshot:
		m, name, err := s.SnapshotMark()
		if err != nil {
			return rep, err
		}
		rep.Snapshot = name
		if m.Seq != 0 {
			rep.Mark = &m
		}
	case OpHistoryArchive:
		if req.Mark == nil || !filepath.IsAbs(req.Name) {
			return rep, views.Refusedf("history archive without a snapshot's mark and an absolute archive directory")
		}
		a, err := s.Archive(req.Name, *req.Mark)
		if err != nil {
			return rep, err
		}
		rep.Archived = &a
	default:
		v, err := s.AcceptClock(req.By)
		if err != nil {
			return rep, err
		}
		rep.Clock = &v
	}
	return rep, nil
}
