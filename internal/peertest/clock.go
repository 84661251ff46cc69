package peertest

import (
	"sync/atomic"
	"time"
)

// Clock is a wall clock a test sets (host.ServeOptions.Now), at millisecond
// precision: the machine's clock cannot be set back in a test.
type Clock struct{ ms atomic.Int64 }

// NewClock is a Clock at t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.Set(t)
	return c
}

// Now reads the clock.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.ms.Add(d.Milliseconds()) }
