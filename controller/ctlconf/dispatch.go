package ctlconf

import (
	"fmt"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// Dispatch timeouts: how long the agent's call may run before the host
// stops it (the dispatch's deadline), in ms. DESIGN.md section 5, step 3.
const (
	// DefaultDispatchTimeoutMs is a call's timeout when the agent names
	// none: 30 s, well inside the minute after which MCP clients commonly
	// give up on a tool call, so that the agent hears how its call ended
	// (uncertain, at worst) rather than a client-side timeout that says
	// nothing; and far above what a local application takes to answer.
	DefaultDispatchTimeoutMs = 30_000
	// DefaultMaxDispatchTimeoutMs is the longest timeout an agent may ask
	// for when the config sets no maximum: 5 min, the longest response
	// timeout a route may have, so that an agent can wait as long as the
	// operator lets an application take.
	DefaultMaxDispatchTimeoutMs = 300_000
	// MaxDispatchTimeoutMs bounds both settings: 5 min, so that a call,
	// its deadline's tolerance and the host's answer stay inside the MCP
	// proxy's answer bound (controller/mcpproxy.ProxyAnswerBound, 11 min,
	// with an approval's park window before it).
	MaxDispatchTimeoutMs = 300_000
	// MinDispatchTimeoutMs is the shortest timeout a call may have: the
	// tolerance the host grants a deadline for the two clocks
	// (msg.DeadlineTolerance, 2 s). A shorter one the host could not
	// honour: it delivers a call until its deadline plus the tolerance,
	// so `timeoutMs: 1` would be answered and charged as if it said 2 s.
	MinDispatchTimeoutMs = int64(msg.DeadlineTolerance / time.Millisecond)
)

// DispatchTimeouts are a config's dispatch timeouts, in ms; 0 (or absent)
// is the default of each, and each is at least MinDispatchTimeoutMs. The
// agent may ask for any timeout from MinDispatchTimeoutMs to MaxTimeoutMs
// (oracle_call's and oracle_discover's timeoutMs).
type DispatchTimeouts struct {
	DefaultTimeoutMs int64 `json:"defaultTimeoutMs,omitempty"`
	MaxTimeoutMs     int64 `json:"maxTimeoutMs,omitempty"`
}

// DefaultTimeout is a call's timeout when the agent names none.
func (c *Config) DefaultTimeout() time.Duration {
	if c.Dispatch != nil && c.Dispatch.DefaultTimeoutMs != 0 {
		return time.Duration(c.Dispatch.DefaultTimeoutMs) * time.Millisecond
	}
	return DefaultDispatchTimeoutMs * time.Millisecond
}

// MaxTimeoutMs is the longest timeout, in ms, an agent may ask for.
func (c *Config) MaxTimeoutMs() int64 {
	if c.Dispatch != nil && c.Dispatch.MaxTimeoutMs != 0 {
		return c.Dispatch.MaxTimeoutMs
	}
	return DefaultMaxDispatchTimeoutMs
}

func (c *Config) validateDispatch() error {
	if c.Dispatch == nil {
		return nil
	}
	for _, f := range []struct {
		field string
		ms    int64
	}{{"dispatch.defaultTimeoutMs", c.Dispatch.DefaultTimeoutMs}, {"dispatch.maxTimeoutMs", c.Dispatch.MaxTimeoutMs}} {
		if f.ms != 0 && (f.ms < MinDispatchTimeoutMs || f.ms > MaxDispatchTimeoutMs) {
			return fmt.Errorf("%s: %d is outside %d to %d (0 or absent: the default)", f.field, f.ms, MinDispatchTimeoutMs, MaxDispatchTimeoutMs)
		}
	}
	if def, max := c.DefaultTimeout().Milliseconds(), c.MaxTimeoutMs(); def > max {
		return fmt.Errorf("dispatch.defaultTimeoutMs: %d exceeds dispatch.maxTimeoutMs %d", def, max)
	}
	return nil
}
