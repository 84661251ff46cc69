package operator

import (
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// deadlinePassedReason is the refusal of a dispatch whose deadline passed
// before the host could deliver it: before admission, during the consent
// wait, or at the last moment before the reservation is journaled.
const deadlinePassedReason = "the call's deadline passed before the host could deliver it; nothing was reserved or charged"

// deadlinePassed reports whether deadline (unix ms; 0 when the controller
// sent none) has passed by the host's clock now, allowing msg.DeadlineTolerance:
// a clock exactly msg.DeadlineTolerance past the deadline is still in time.
func deadlinePassed(deadline int64, now time.Time) bool {
	return deadline != 0 && now.UnixMilli() > deadline+msg.DeadlineTolerance.Milliseconds()
}

// deadlineClock is the wall time a dispatch's deadline is compared with:
// the host's wall clock as it reads now (ServeOptions.Now), not the clock
// that never runs backwards (Store.clock). A deadline is the controller's
// reading of the same wall clock plus the agent's timeout, so the two
// readings must be taken alike: after the wall clock is set back, the
// host's never-backwards clock stays at the latest time it recorded, and
// every deadline the controller computes until the clock catches up would
// look passed. What the never-backwards clock protects (daily counts,
// grant windows) is untouched: a deadline only ever refuses a call.
func (s *Store) deadlineClock() time.Time { return s.now() }

// deadlineRefusal refuses d when its deadline has passed by the host's
// wall clock (deadlineClock), logging the detail (when, and at which
// step); nil otherwise.
func (s *Store) deadlineRefusal(d *checkedDispatch, step string) *msg.Refusal {
	now := s.deadlineClock()
	if !deadlinePassed(d.deadline, now) {
		return nil
	}
	s.logRefusal(d, "the deadline passed "+step,
		"deadline", time.UnixMilli(d.deadline).UTC().Format(time.RFC3339Nano),
		"clock", now.UTC().Format(time.RFC3339Nano), "tolerance", msg.DeadlineTolerance)
	return &msg.Refusal{Code: msg.CodeDeadlinePassed, Reason: deadlinePassedReason}
}

// cutoff is the wall time (of the host's deadline clock now) past which nothing of
// d's delivery may run: its deadline plus msg.DeadlineTolerance, or the zero time
// when the controller sent no deadline.
func (d *checkedDispatch) cutoff(now time.Time) time.Time {
	if d.deadline == 0 {
		return time.Time{}
	}
	left := time.UnixMilli(d.deadline + msg.DeadlineTolerance.Milliseconds()).Sub(now)
	// A delivery measures its bound on this process's monotonic clock:
	// the host's wall clock (injected) gives what is left, time.Now when
	// it ends.
	return time.Now().Add(left)
}
