package operator

import (
	"fmt"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
)

// The store's clock never reads earlier than the latest time it recorded
// (Store.clockLocked, state.Latest), so that a clock set back refills no
// daily count and revives no expired grant. A clock set forward and then
// corrected would keep the far-future time until real time caught up:
// `steward-operator clock accept` (AcceptClock) is the operator's word
// that the wall clock is right, journaled as a clock-accept record that
// replay applies as the running store does (DESIGN.md section 5, "A clock
// set forward").
//
// Nothing refills: every daily count of a day after the accepted day (a
// grant's, an agent's with its conversations, the day an attempt not yet
// ended counted its reservation on) moves to the accepted day with its count, so
// the calls made on the forward day count against today. Asks keep their
// absolute times: an answered or expired ask stays as it is, and a
// pending ask expires at its recorded expiry, by the accepted clock.

// AcceptClock accepts the wall clock as the store's time, when it reads
// behind the latest time recorded; by is who asks ("uid:N"). A clock that
// is not behind is refused, and nothing is journaled.
func (s *Store) AcceptClock(by string) (views.ClockView, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	now, was := s.now().UnixMilli(), s.st.Latest
	s.mu.Unlock()
	if now >= was {
		return views.ClockView{}, views.Refusedf("the wall clock (%s) is not behind the latest time the store recorded (%s): there is nothing to accept, and nothing was recorded",
			stamp(now), stamp(was))
	}
	rec := hostlog.ClockAccept{At: now, Was: was, By: by}
	if _, err := s.append(hostlog.KindClockAccept, rec); err != nil {
		return views.ClockView{}, err
	}
	s.mu.Lock()
	v := s.st.acceptClock(rec)
	s.mu.Unlock()
	s.log.Warn("steward-operator: the wall clock was accepted behind the latest time recorded; the daily counts of later days carry to its day",
		"clock", v.At, "latest", v.Was, "by", by, "grants", v.Grants, "agents", v.Agents, "attempts", v.Attempts)
	return v, nil
}

// ClockAccept replays a clock-accept record: the state it leaves is the
// one the running store's AcceptClock left.
func (rp *replayer) ClockAccept(_ journal.Record, b *hostlog.ClockAccept) error {
	if b.At >= b.Was {
		return fmt.Errorf("a clock accept at %s is not behind the latest time %s it names", stamp(b.At), stamp(b.Was))
	}
	rp.st.acceptClock(*b)
	return nil
}

// acceptClock sets the store's time back to r.At and moves every daily
// count of a later day to r.At's day, keeping its count. Called with
// s.mu held (or by replay).
func (st *state) acceptClock(r hostlog.ClockAccept) views.ClockView {
	day := r.At / 86_400_000
	// Replay raised Latest to this record's own time (the machine's
	// clock when it was appended) before visiting it: the accepted time
	// is what counts from here on.
	st.Latest, st.clockBack = r.At, false
	v := views.ClockView{At: stamp(r.At), Was: stamp(r.Was), Day: time.UnixMilli(r.At).UTC().Format(time.DateOnly)}
	for _, g := range st.Grants {
		if g.Day > day {
			g.Day = day
			v.Grants++
		}
	}
	for _, u := range st.AgentUse {
		if u.Day > day {
			u.Day = day
			v.Agents++
		}
		// The rate bucket (memory only) was filled by the forward clock.
		u.filled = min(u.filled, r.At)
	}
	for _, a := range st.Attempts {
		// Only an attempt that has not ended may still give its count
		// back (a release); one that ended keeps the day it counted on,
		// as the history index holds it.
		if a.EndAt == (journal.Place{}) && a.Day > day {
			a.Day = day
			v.Attempts++
		}
	}
	return v
}

func stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
