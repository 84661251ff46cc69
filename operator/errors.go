package operator

import (
	"errors"
	"fmt"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
)

// ErrRefused marks input the store refused: a bad name, an unknown
// controller, a fork of a route, a bound passed. The command exits 2.
var ErrRefused = errors.New("refused")

// refusedInput is err, one line of what a record may not hold (package
// hostlog's checks), as the store words a refusal of its input.
func refusedInput(err error) error { return Refusedf("%v", err) }

// Refusedf formats a one-line refusal wrapping ErrRefused: what the store,
// the admin language, the host and the command line each refuse of their
// input.
func Refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// MaxDeliveryTime is the longest one delivery to an application may run:
// the longest connect and response timeouts a route may have. A
// redelivery, which no dispatch deadline bounds, runs at most this long.
const MaxDeliveryTime = (hostlog.MaxConnectMs + hostlog.MaxResponseMs) * time.Millisecond

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
