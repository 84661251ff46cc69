package installer

import (
	"context"

	"github.com/stewardrt/steward/controller/foreground"
)

// runControllerAttempts lists the controller's uncertain attempts through
// its foreground socket, as the controller's account: the operator's way
// to `steward-controller attempts list` without being root. The socket is
// socket-activated, so a stopped controller starts to answer.
func runControllerAttempts(ctx context.Context, c *call, o options) int {
	return c.foreground(ctx, foreground.Request{Op: foreground.OpAttempts})
}

// runControllerAttemptInspect asks the controller what the host recorded
// of one attempt (`steward-controller attempts inspect`).
func runControllerAttemptInspect(ctx context.Context, c *call, o options) int {
	if err := checkRequestID(o.operand); err != nil {
		return c.refusef("%v", err)
	}
	return c.foreground(ctx, foreground.Request{Op: foreground.OpInspect, ID: o.operand})
}

// runControllerAttemptResolve records what the host says of an uncertain
// attempt (`steward-controller attempts resolve`): it asks the host and
// journals its answer; it never re-sends anything.
func runControllerAttemptResolve(ctx context.Context, c *call, o options) int {
	if err := checkRequestID(o.operand); err != nil {
		return c.refusef("%v", err)
	}
	return c.foreground(ctx, foreground.Request{Op: foreground.OpResolve, ID: o.operand})
}
