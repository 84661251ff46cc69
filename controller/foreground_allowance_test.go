package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/wire/msg"
)

// fgSubmit submits one tool request on the stack's foreground socket, as
// steward-installer controller-tool does.
func fgSubmit(t *testing.T, ctx context.Context, s *stack, tool string, args map[string]any) (foreground.Reply, ToolResult, error) {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := foreground.Call(ctx, s.cfg.Sockets.Foreground, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpSubmit, Tool: tool, Arguments: b})
	var tr ToolResult
	if err == nil {
		if jerr := json.Unmarshal(rep.Result, &tr); jerr != nil {
			t.Fatalf("%s result %q: %v", tool, rep.Result, jerr)
		}
	}
	return rep, tr, err
}

// TestForegroundWithoutAllowanceSpendsNothing: under a payer policy that
// lets every agent spend (the journey's shape) but names no foreground
// allowance, a foreground oracle_call is refused with the one line that
// says how root grants one, before anything is journaled (the journal's
// last record is the same), consented or charged (the host's purse is the
// same); a discovery still runs, at price 0; an MCP agent still spends.
// A grant that prices discovery has the payer refuse the foreground's
// discovery at the reserve with the same line, nothing charged.
func TestForegroundWithoutAllowanceSpendsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := newStack(t, stackOpts{price: 5, funded: 1000, edit: payerPolicy(map[string]any{"maxPerCall": 100, "perDay": 100_000})})
	s.startController()
	seq, purse := s.lastSeq(), s.purse()
	rep, _, err := fgSubmit(t, ctx, s, ToolCall, callArgs("fg-1", map[string]any{"text": "x"}))
	want := "the operator account has no allowance: the foreground socket spends no credits unless root grants payer.foregroundAllowance {maxPerCall, perDay} in the controller's config (steward-installer controller-config, then controller-enroll and a restart)"
	if !errors.Is(err, foreground.ErrRefused) || rep.Error != want || rep.ID != "" || rep.Result != nil {
		t.Fatalf("foreground oracle_call without an allowance: %+v %v\nwant the refusal %q", rep, err, want)
	}
	if got := s.lastSeq(); got != seq {
		t.Fatalf("the controller journal moved %d -> %d: the refusal journaled something", seq, got)
	}
	if got := s.purse(); got != purse {
		t.Fatalf("the host's purse %+v, was %+v", got, purse)
	}

	rep, tr, err := fgSubmit(t, ctx, s, ToolDiscover, map[string]any{"application": "appliance", "query": "sha"})
	if err != nil || rep.State != foreground.StateDone || tr.Outcome != msg.StateDefinite || tr.Status != 200 || tr.Charge == nil || *tr.Charge != 0 {
		t.Fatalf("foreground discovery without an allowance: %+v %+v %v", rep, tr, err)
	}
	if got := s.purse(); got != purse {
		t.Fatalf("the host's purse after a free discovery %+v, was %+v", got, purse)
	}
	cs := s.client(ctx)
	if tr, _ := call(t, ctx, cs, ToolCall, callArgs("mcp-1", map[string]any{"text": "x"})); tr.Outcome != msg.StateDefinite || tr.Charge == nil || *tr.Charge != 5 {
		t.Fatalf("an agent's call under the same policy: %+v", tr)
	}

	s = newStack(t, stackOpts{price: 5, discovery: 2, funded: 1000, edit: payerPolicy(map[string]any{"maxPerCall": 100, "perDay": 100_000})})
	s.startController()
	_, tr, err = fgSubmit(t, ctx, s, ToolDiscover, map[string]any{"application": "appliance", "query": "sha"})
	if err != nil {
		t.Fatal(err)
	}
	wantPayerRefusal(t, s, tr, want, 0)
}

// TestForegroundAllowance: with payer.foregroundAllowance {5, 10}, two
// foreground calls at 5 are charged, and the third is refused naming the
// allowance's day; the agents' defaults (100,000 a day) are no part of it.
func TestForegroundAllowance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := newStack(t, stackOpts{price: 5, funded: 1000, edit: payerPolicy(map[string]any{"maxPerCall": 100, "perDay": 100_000,
		"foregroundAllowance": map[string]any{"maxPerCall": 5, "perDay": 10}})})
	s.startController()
	if l, ok := s.cfg.ForegroundAllowance(); !ok || l != (ctlconf.PayerLimits{MaxPerCall: 5, PerDay: 10}) {
		t.Fatalf("the config's allowance: %+v %v", l, ok)
	}
	for i, id := range []string{"fg-1", "fg-2"} {
		rep, tr, err := fgSubmit(t, ctx, s, ToolCall, callArgs(id, map[string]any{"text": id}))
		if err != nil || rep.State != foreground.StateDone || tr.Outcome != msg.StateDefinite || tr.Charge == nil || *tr.Charge != 5 {
			t.Fatalf("foreground call %d within the allowance: %+v %+v %v", i+1, rep, tr, err)
		}
	}
	if p := s.purse(); p.Charged != 10 {
		t.Fatalf("purse %+v, want the two calls charged", p)
	}
	_, tr, err := fgSubmit(t, ctx, s, ToolCall, callArgs("fg-3", map[string]any{"text": "fg-3"}))
	if err != nil {
		t.Fatal(err)
	}
	wantPayerRefusal(t, s, tr, "the foreground allowance of 10 credits a day has 0 left today (UTC "+time.Now().UTC().Format(time.DateOnly)+"), this call asks for 5; it refills at 00:00 UTC", 10)
}
