package operator

import (
	"testing"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// TestDeadlineBounds checks deadlinePassed at the tolerance and one ms
// past it, and that a dispatch without a deadline never passes one.
func TestDeadlineBounds(t *testing.T) {
	now := time.UnixMilli(1_900_000_000_000)
	tol := msg.DeadlineTolerance.Milliseconds()
	for _, c := range []struct {
		deadline int64
		passed   bool
	}{
		{0, false},
		{now.UnixMilli(), false},
		{now.UnixMilli() - tol, false},
		{now.UnixMilli() - tol - 1, true},
	} {
		if got := hostlog.DeadlinePassed(c.deadline, now); got != c.passed {
			t.Errorf("deadline %d at %d: passed %v, want %v", c.deadline, now.UnixMilli(), got, c.passed)
		}
	}
}
