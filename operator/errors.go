package operator

import (
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
)

// refusedInput is err, one line of what a record may not hold (package
// hostlog's checks), as the store words a refusal of its input.
func refusedInput(err error) error { return views.Refusedf("%v", err) }

// MaxDeliveryTime is the longest one delivery to an application may run:
// the longest connect and response timeouts a route may have. A
// redelivery, which no dispatch deadline bounds, runs at most this long.
const MaxDeliveryTime = (hostlog.MaxConnectMs + hostlog.MaxResponseMs) * time.Millisecond
