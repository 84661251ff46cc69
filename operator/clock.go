package operator

import (
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
)

// AcceptClock is `clock accept` (hostlog.ClockAccept): the wall clock, when
// it reads behind the latest time recorded, becomes the store's time; by
// is who asks. A clock not behind is refused, and nothing is journaled.
func (s *Store) AcceptClock(by string) (views.ClockView, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	now, was := s.now().UnixMilli(), s.st.Latest
	s.mu.Unlock()
	if now >= was {
		return views.ClockView{}, views.Refusedf("the wall clock (%s) is not behind the latest time the store recorded (%s): there is nothing to accept, and nothing was recorded", views.Stamp(now), views.Stamp(was))
	}
	rec := hostlog.ClockAccept{At: now, Was: was, By: by}
	if _, err := s.append(hostlog.KindClockAccept, rec); err != nil {
		return views.ClockView{}, err
	}
	s.mu.Lock()
	v := s.st.acceptClock(rec)
	s.mu.Unlock()
	s.log.Warn("steward-operator: the wall clock was accepted behind the latest time recorded", "clock", v.At, "latest", v.Was, "by", by)
	return v, nil
}

// ClockAccept replays a clock-accept record as AcceptClock applied it.
func (rp *replayer) ClockAccept(_ journal.Record, b *hostlog.ClockAccept) error {
	err := b.Check()
	if err == nil {
		rp.st.acceptClock(*b)
	}
	return err
}

// acceptClock sets the time to r.At (over replay's raise to the record's
// own time) and moves each count of a later day to r.At's day, keeping it:
// a grant's, an agent's (its rate bucket refilled from r.At), an open
// attempt's (its release gives it back); an ended one keeps its day, as
// the history index does. s.mu is held, or replay runs.
func (st *state) acceptClock(r hostlog.ClockAccept) views.ClockView {
	day, v := r.At/msPerDay, views.NewClockView(r.At, r.Was)
	st.Latest, st.clockBack = r.At, false
	for _, g := range st.Grants {
		if g.Day > day {
			g.Day, v.Grants = day, v.Grants+1
		}
	}
	for _, u := range st.AgentUse {
		if u.Day > day {
			u.Day, v.Agents = day, v.Agents+1
		}
		u.filled = min(u.filled, r.At)
	}
	for _, a := range st.Attempts {
		if a.EndAt == (journal.Place{}) && a.Day > day {
			a.Day, v.Attempts = day, v.Attempts+1
		}
	}
	return v
}
