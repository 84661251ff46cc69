package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/wire/msg"
)

// payerPolicy edits a stack's controller config to the given policy (nil
// removes it).
func payerPolicy(policy map[string]any) func(m map[string]any) {
	return func(m map[string]any) {
		if policy == nil {
			delete(m, "payer")
		} else {
			m["payer"] = policy
		}
	}
}

// wantPayerRefusal checks a call refused by the payer's own word, and that
// the host reserved and charged nothing for it.
func wantPayerRefusal(t *testing.T, s *stack, tr ToolResult, reason string, charged uint64) {
	t.Helper()
	if tr.Outcome != msg.StateRefused || tr.Refusal == nil || tr.Refusal.Code != msg.CodePayerLimit || tr.Refusal.Reason != reason {
		t.Fatalf("result %+v (refusal %+v), want payer-limit %q", tr, tr.Refusal, reason)
	}
	if p := s.purse(); p.Charged != charged || p.Balance != s.funded-charged {
		t.Fatalf("purse %+v, want %d charged", p, charged)
	}
}

// TestPayerRefusesAGrantAboveTheCeiling: the operator issues a grant at a
// price above the payer's per-call ceiling; the host admits the call under
// it and asks; the payer refuses, and nothing is reserved or charged.
// Without a policy no paid call is consented to, naming the missing
// policy; free discovery still works.
func TestPayerRefusesAGrantAboveTheCeiling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newStack(t, stackOpts{price: 900_000, funded: 1_000_000, edit: payerPolicy(map[string]any{"maxPerCall": 10, "perDay": 100})})
	s.startController()
	cs := s.client(ctx)
	tr, _ := call(t, ctx, cs, ToolCall, callArgs("over-1", map[string]any{"text": "x"}))
	wantPayerRefusal(t, s, tr, "the charge of 900000 credits exceeds the payer's ceiling of 10 credits per call", 0)

	s = newStack(t, stackOpts{price: 5, edit: payerPolicy(nil)})
	s.startController()
	cs = s.client(ctx)
	tr, _ = call(t, ctx, cs, ToolCall, callArgs("none-1", map[string]any{"text": "x"}))
	wantPayerRefusal(t, s, tr, "the controller's config has no payer policy (payer: {maxPerCall, perDay}), so it consents to no charge", 0)
	tr, _ = call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance"})
	if tr.Outcome != msg.StateDefinite || tr.Status != 200 || tr.Charge == nil || *tr.Charge != 0 {
		t.Fatalf("free discovery without a policy: %+v", tr)
	}
}

// TestPayerDailyBudget: a principal's budget at N and N+1, the charge of
// each call in its result, the replay of a recorded answer not charged
// again; and a begin left without a result by a crash counts at the
// ceiling after the restart.
func TestPayerDailyBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := newStack(t, stackOpts{price: 5, funded: 100, edit: payerPolicy(map[string]any{"maxPerCall": 5, "perDay": 15})})
	s.startController()
	cs := s.client(ctx)
	for i, id := range []string{"day-1", "day-2"} {
		tr, _ := call(t, ctx, cs, ToolCall, callArgs(id, map[string]any{"text": id}))
		if tr.Outcome != msg.StateDefinite || tr.Charge == nil || *tr.Charge != 5 {
			t.Fatalf("call %d: %+v", i+1, tr)
		}
	}
	// The overview tells the caller its own budget left today.
	_, res := call(t, ctx, cs, ToolOverview, map[string]any{})
	var ov Overview
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &ov); err != nil {
		t.Fatal(err)
	}
	if want := (OverviewPayer{Policy: true, MaxPerCall: 5, PerDay: 15, RemainingToday: 5, Day: time.Now().UTC().Format(time.DateOnly)}); ov.Payer != want {
		t.Fatalf("overview's payer %+v, want %+v", ov.Payer, want)
	}
	tr, _ := call(t, ctx, cs, ToolCall, callArgs("day-1", map[string]any{"text": "day-1"}))
	if !tr.Replayed || tr.Charge == nil || *tr.Charge != 0 {
		t.Fatalf("a replay: %+v", tr)
	}
	s.stopController()

	// The third call of the day crashes after its begin: whether it was
	// consented to is not on disk, so it counts at the ceiling (5): 15
	// spent, the next call is one past the budget.
	child := s.startChild("STEWARD_FAILPOINT=" + FailAfterBegin)
	cs = s.client(ctx)
	go cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: callArgs("day-3", map[string]any{"text": "3"})})
	err := <-child.done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("controller exit: %v, want SIGKILL at %s", err, FailAfterBegin)
	}
	s.startController()
	cs = s.client(ctx)
	tr, _ = call(t, ctx, cs, ToolCall, callArgs("day-4", map[string]any{"text": "4"}))
	wantPayerRefusal(t, s, tr, "the payer's budget of 15 credits a day has 0 left today (UTC "+time.Now().UTC().Format(time.DateOnly)+"), this call asks for 5; it refills at 00:00 UTC", 10)
}

// TestPayerClockSetBack: the controller's injected clock goes back a day
// after a call spent the day's budget: the calls keep counting against the
// latest day recorded, nothing is refilled, across a restart too.
func TestPayerClockSetBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The grant is in force for two days back, so that the controller's
	// clock set back still finds it live: only the budget can refuse.
	s := newStack(t, stackOpts{price: 5, funded: 100, notBefore: time.Now().Add(-48 * time.Hour),
		edit: payerPolicy(map[string]any{"maxPerCall": 5, "perDay": 5})})
	var back atomic.Bool
	now := func() time.Time {
		if back.Load() {
			return time.Now().Add(-24 * time.Hour)
		}
		return time.Now()
	}
	// One machine, one wall clock: the host reads it too (a dispatch's
	// deadline is the controller's reading of it).
	s.hostNow = now
	s.restartHost()
	s.startControllerWith(Options{Now: now})
	cs := s.client(ctx)
	if tr, _ := call(t, ctx, cs, ToolCall, callArgs("clock-1", map[string]any{"text": "1"})); tr.Outcome != msg.StateDefinite {
		t.Fatalf("first call: %+v", tr)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	want := "the payer's budget of 5 credits a day has 0 left today (UTC " + today + "), this call asks for 5; it refills at 00:00 UTC"
	back.Store(true)
	tr, _ := call(t, ctx, cs, ToolCall, callArgs("clock-2", map[string]any{"text": "2"}))
	wantPayerRefusal(t, s, tr, want, 5)
	s.stopController()
	s.startControllerWith(Options{Now: now})
	cs = s.client(ctx)
	tr, _ = call(t, ctx, cs, ToolCall, callArgs("clock-3", map[string]any{"text": "3"}))
	wantPayerRefusal(t, s, tr, want, 5)
}
