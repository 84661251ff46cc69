package operator

import (
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// deadlinePassedReason is the refusal of a dispatch whose deadline passed
// before the host could deliver it: before admission, during the consent
// wait, or at the last moment before the reservation is journaled.
const deadlinePassedReason = "the call's deadline passed before the host could deliver it; nothing was reserved or charged"

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
func (s *Store) deadlineRefusal(d *hostlog.CheckedDispatch, step string) *msg.Refusal {
	now := s.deadlineClock()
	if !hostlog.DeadlinePassed(d.Deadline, now) {
		return nil
	}
	s.logRefusal(d, "the deadline passed "+step,
		"deadline", time.UnixMilli(d.Deadline).UTC().Format(time.RFC3339Nano),
		"clock", now.UTC().Format(time.RFC3339Nano), "tolerance", msg.DeadlineTolerance)
	return &msg.Refusal{Code: msg.CodeDeadlinePassed, Reason: deadlinePassedReason}
}
