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

// deadlineRefusal refuses d when its deadline has passed by the host's
// clock now, logging the detail (when, and at which step); nil otherwise.
func (s *Store) deadlineRefusal(d *checkedDispatch, now time.Time, step string) *msg.Refusal {
	if !deadlinePassed(d.deadline, now) {
		return nil
	}
	s.logRefusal(d, "the deadline passed "+step,
		"deadline", time.UnixMilli(d.deadline).UTC().Format(time.RFC3339Nano),
		"clock", now.UTC().Format(time.RFC3339Nano), "tolerance", msg.DeadlineTolerance)
	return &msg.Refusal{Code: msg.CodeDeadlinePassed, Reason: deadlinePassedReason}
}

// cutoff is the wall time (of the host's clock now) past which nothing of
// d's delivery may run: its deadline plus msg.DeadlineTolerance, or the zero time
// when the controller sent no deadline.
func (d *checkedDispatch) cutoff(now time.Time) time.Time {
	if d.deadline == 0 {
		return time.Time{}
	}
	left := time.UnixMilli(d.deadline + msg.DeadlineTolerance.Milliseconds()).Sub(now)
	// A delivery measures its bound on this process's monotonic clock:
	// the host's wall clock (injected, never backwards) gives what is
	// left, time.Now when it ends.
	return time.Now().Add(left)
}
