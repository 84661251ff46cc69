package operator

import (
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// checkDeadline refuses a dispatch of controller ctrl whose deadline has
// passed by the host's wall clock (deadlineClock), before anything is
// admitted or reserved. A dispatch without a deadline comes from a
// controller before deadlines: it is delivered under the route's timeouts
// alone, and the host says so in its log once per controller.
func (s *Store) checkDeadline(ctrl string, c *hostlog.CheckedDispatch) *msg.Refusal {
	if c.Deadline == 0 {
		s.warnOnce("no-deadline/"+ctrl, "steward-operator: controller sends dispatches without a deadline (a controller before deadlines); they are delivered under the route's timeouts alone",
			"controller", ctrl, "attempt", c.Attempt)
		return nil
	}
	return s.deadlineRefusal(c, "before admission")
}

// warnOnce logs a warning the first time key is seen by this store.
func (s *Store) warnOnce(key, message string, args ...any) {
	if _, seen := s.warned.LoadOrStore(key, true); !seen {
		s.log.Warn(message, args...)
	}
}
