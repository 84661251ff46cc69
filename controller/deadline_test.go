package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/heldapp"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// withArg is args with one more argument.
func withArg(args map[string]any, key string, v any) map[string]any {
	args[key] = v
	return args
}

// begins reads the begin records of the controller journal, read-only.
func (s *stack) begins() []ledger.Begin {
	s.t.Helper()
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	var out []ledger.Begin
	if err := j.Iterate(1, func(r journal.Record) error {
		if r.Kind != ledger.KindBegin {
			return nil
		}
		var b ledger.Begin
		if err := ledger.Decode(r, &b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// TestDispatchDeadline: every dispatch carries a deadline, journaled in
// its begin: the config's default when the agent names no timeoutMs (here
// the config sets 20 s), the agent's own when it does (up to the config's
// maximum, here 40 s: one ms more is refused before anything is journaled,
// naming the maximum).
func TestDispatchDeadline(t *testing.T) {
	s := newStack(t, stackOpts{edit: func(m map[string]any) {
		m["dispatch"] = map[string]any{"defaultTimeoutMs": 20_000, "maxTimeoutMs": 40_000}
	}})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	before := time.Now().UnixMilli()
	if r, _ := call(t, ctx, cs, ToolCall, callArgs("dl-default", map[string]any{"text": "x"})); r.Outcome != msg.StateDefinite {
		t.Fatalf("dl-default: %+v", r)
	}
	if r, _ := call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance", "timeoutMs": 40_000}); r.Outcome != msg.StateDefinite {
		t.Fatalf("discover at the maximum: %+v", r)
	}
	after := time.Now().UnixMilli()
	seq := s.lastSeq()
	r, res := call(t, ctx, cs, ToolCall, withArg(callArgs("dl-over", map[string]any{"text": "x"}), "timeoutMs", 40_001))
	if !res.IsError || r.Refusal == nil || r.Refusal.Code != msg.CodeBadRequest || r.Refusal.Reason != "arguments refused: timeoutMs: 40001 is outside 2000 to 40000 ms (the host holds a deadline only to within 2000 ms)" {
		t.Fatalf("one past the maximum: %+v", r)
	}
	if s.lastSeq() != seq {
		t.Fatal("a refused timeoutMs journaled something")
	}
	s.stopController()
	bs := s.begins()
	if len(bs) != 2 {
		t.Fatalf("%d begins, want 2", len(bs))
	}
	for i, want := range []int64{20_000, 40_000} {
		if d := bs[i].Deadline; d < before+want || d > after+want {
			t.Errorf("begin %s: deadline %d, want %d ms after the call (between %d and %d)", bs[i].Attempt, d, want, before+want, after+want)
		}
	}
}

// TestDispatchTimeoutsConfig: the config's dispatch timeouts are bounded
// (1 ms to 5 min, the default at most the maximum) and default to 30 s
// and 5 min.
func TestDispatchTimeoutsConfig(t *testing.T) {
	var c ctlconf.Config
	if c.DefaultTimeout() != 30*time.Second || c.MaxTimeoutMs() != 300_000 {
		t.Fatalf("defaults: %v %d", c.DefaultTimeout(), c.MaxTimeoutMs())
	}
	base := `{"name":"c","stateDir":"/s","keyDir":"/k","bundle":"/b","sockets":{"mcp":"/m","reverse":"/r","foreground":"/f"},` +
		`"agents":{"uids":[],"gids":[]}`
	for _, tc := range []struct{ dispatch, want string }{
		{`{"defaultTimeoutMs":300000,"maxTimeoutMs":300000}`, ""},
		{`{"maxTimeoutMs":300001}`, "dispatch.maxTimeoutMs: 300001 is outside 2000 to 300000 (0 or absent: the default)"},
		{`{"defaultTimeoutMs":-1}`, "dispatch.defaultTimeoutMs: -1 is outside 2000 to 300000 (0 or absent: the default)"},
		{`{"defaultTimeoutMs":2000,"maxTimeoutMs":2000}`, ""},
		{`{"defaultTimeoutMs":1999,"maxTimeoutMs":2000}`, "dispatch.defaultTimeoutMs: 1999 is outside 2000 to 300000 (0 or absent: the default)"},
		{`{"maxTimeoutMs":1999}`, "dispatch.maxTimeoutMs: 1999 is outside 2000 to 300000 (0 or absent: the default)"},
		{`{"defaultTimeoutMs":10001,"maxTimeoutMs":10000}`, "dispatch.defaultTimeoutMs: 10001 exceeds dispatch.maxTimeoutMs 10000"},
		{`{"maxTimeoutMs":10000}`, "dispatch.defaultTimeoutMs: 30000 exceeds dispatch.maxTimeoutMs 10000"},
		{`{"timeoutMs":1}`, `json: unknown field "timeoutMs"`},
	} {
		_, err := ctlconf.Parse([]byte(base + `,"dispatch":` + tc.dispatch + `}`))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.dispatch, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ctlconf.ErrConfig) || !strings.HasSuffix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %s", tc.dispatch, err, tc.want)
		}
	}
}

// TestDeadlineEndsHeldCall: an application that reads the request and
// holds it is not waited for past the agent's timeoutMs (2 s, the least) and the
// tolerance, though the route allows a 10 s answer: the agent is told the
// call is uncertain because its deadline passed, and the call is never
// retried. The application answers nothing until the test ends (it blocks
// on a channel; nothing here sleeps).
func TestDeadlineEndsHeldCall(t *testing.T) {
	s := newStack(t, stackOpts{noApp: true})
	got := heldapp.Serve(t, s.appSock)
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	start := time.Now()
	r, res := call(t, ctx, cs, ToolCall, withArg(callArgs("held-1", map[string]any{"text": "x"}), "timeoutMs", 2000))
	took := time.Since(start)
	if !res.IsError || r.Outcome != msg.StateUncertain || r.Detail != "the call's deadline passed before the application answered" {
		t.Fatalf("held-1: %+v", r)
	}
	if lo, hi := 2*time.Second+msg.DeadlineTolerance, 10*time.Second; took < lo || took >= hi {
		t.Fatalf("the call took %v: want the deadline plus the tolerance (%v), not the route's response timeout", took, lo)
	}
	if n := len(got); n != 1 {
		t.Fatalf("the application read %d requests, want 1", n)
	}
}

// TestControllerStopsWaitingAtDeadline: a host that takes the dispatch
// and never answers it (here one that reads the frame and holds it, as a
// host before deadlines might) is waited for until the deadline plus twice
// msg.DeadlineTolerance, not longer: the agent is told its call is
// uncertain because the deadline passed, and the dispatch it was sent
// carried that deadline.
func TestControllerStopsWaitingAtDeadline(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.stopHost()
	if err := <-s.hostDone; err != nil {
		t.Fatal(err)
	}
	s.stopHost = nil
	deadlines := holdingHost(t, s)
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	start := time.Now()
	r, res := call(t, ctx, cs, ToolCall, withArg(callArgs("unanswered-1", map[string]any{"text": "x"}), "timeoutMs", 2000))
	took := time.Since(start)
	if !res.IsError || r.Outcome != msg.StateUncertain || r.Detail != "the call's deadline passed with no answer from the host; the attempt may still be in flight or delivered" {
		t.Fatalf("unanswered-1: %+v", r)
	}
	if lo := 2*time.Second + 2*msg.DeadlineTolerance; took < lo || took >= lo+10*time.Second {
		t.Fatalf("the call took %v, want the deadline plus twice the tolerance (%v)", took, lo)
	}
	var d int64
	select {
	case d = <-deadlines:
	default:
		t.Fatal("the host never received the dispatch")
	}
	if d < start.UnixMilli()+2000 || d > start.Add(took).UnixMilli() {
		t.Fatalf("the dispatch's deadline %d is not 2000 ms after the call (began %d)", d, start.UnixMilli())
	}
}

// holdingHost serves the stack's forward socket as a host that completes
// the handshake with the operator's key, reads each dispatch, sends its
// deadline on the channel it returns, and never answers.
func holdingHost(t *testing.T, s *stack) chan int64 {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	deadlines := make(chan int64, 4)
	serveFrames(t, s, func(req *wire.Envelope) (string, any) {
		var d msg.Dispatch
		if req.T == msg.TypeDispatch && req.Decode(&d) == nil {
			deadlines <- d.Deadline
			<-release
		}
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: "held"}
	})
	return deadlines
}
