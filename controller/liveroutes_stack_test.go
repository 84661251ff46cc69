package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// operatorCLI runs one steward-operator command in this process: against
// the running host's admin socket when the host holds the store.
func (s *stack) operatorCLI(args ...string) string {
	s.t.Helper()
	var out, errb bytes.Buffer
	if code := (&cli.CLI{Stdout: &out, Stderr: &errb}).Main(append(args, "--store", s.store)); code != 0 {
		s.t.Fatalf("steward-operator %v: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

// overviewOf runs steward_overview on the session.
func overviewOf(t *testing.T, ctx context.Context, cs *mcp.ClientSession) Overview {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolOverview, Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var ov Overview
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &ov); err != nil {
		t.Fatal(err)
	}
	return ov
}

// TestRouteRegisteredWhileRunning: a route the operator registers on the
// running host is found, listened on and callable by the next overview,
// discovery and call of the same MCP session, with no restart of either
// daemon and no new session; deactivated, it stops being offered; active
// again, it is callable again; removed, it is gone for good. Every change is
// the shipped command through the running host's admin socket.
func TestRouteRegisteredWhileRunning(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	if ov := overviewOf(t, ctx, cs); len(ov.Applications) != 1 || ov.Applications[0].Application != "appliance" {
		t.Fatalf("overview before: %+v", ov.Applications)
	}
	second := map[string]any{"application": "second", "query": "sha"}
	if d, _ := call(t, ctx, cs, ToolDiscover, second); d.Refusal == nil || d.Refusal.Code != msg.CodeBadRequest ||
		!strings.Contains(d.Refusal.Reason, `"second" is not an application of this controller`) {
		t.Fatalf("second before its route: %+v", d)
	}

	// The operator grants and routes a second application (the same
	// appliance behind another name) while both daemons run.
	s.operatorCLI("grant", "issue", "--controller", "dev", "--application", "second", "--price", "1", "--per-day", "100", "--not-after", "+1h")
	req, _ := json.Marshal(views.RouteRequest{Controller: "dev", Upstream: s.appSock, Forward: filepath.Join(s.dir, "fwd2.sock"),
		Reverse: filepath.Join(s.dir, "rev.sock"), Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 10000}})
	reqPath := filepath.Join(s.dir, "route2.json")
	if err := os.WriteFile(reqPath, req, 0o600); err != nil {
		t.Fatal(err)
	}
	s.operatorCLI("route", "register", "r-second", "second", reqPath)

	ov := overviewOf(t, ctx, cs)
	if len(ov.Applications) != 2 || ov.Applications[1].Application != "second" || ov.Applications[1].Availability != "reachable" {
		t.Fatalf("overview after the route was registered: %+v", ov.Applications)
	}
	d, res := call(t, ctx, cs, ToolDiscover, second)
	if res.IsError || d.Outcome != msg.StateDefinite || d.Status != 200 || !strings.Contains(string(d.Body), "text.sha256") {
		t.Fatalf("second's discovery on the same session: %+v", d)
	}
	byAddress := map[string]any{"address": "second/text.sha256", "requestId": "live-1", "conversationId": "c1", "arguments": map[string]any{"text": "x"}}
	if d, res := call(t, ctx, cs, ToolCall, byAddress); res.IsError || d.Status != 200 || d.Charge == nil || *d.Charge != 1 {
		t.Fatalf("second's call by address on the same session: %+v", d)
	}

	notOffered := func(when string) {
		t.Helper()
		if ov := overviewOf(t, ctx, cs); len(ov.Applications) != 1 || ov.Applications[0].Application != "appliance" {
			t.Fatalf("overview %s: %+v", when, ov.Applications)
		}
		d, _ := call(t, ctx, cs, ToolDiscover, second)
		if d.Refusal == nil || d.Refusal.Code != msg.CodeBadRequest || !strings.Contains(d.Refusal.Reason, `"second" is not an application of this controller`) {
			t.Fatalf("second %s: %+v", when, d)
		}
		if _, err := os.Stat(filepath.Join(s.dir, "fwd2.sock")); !os.IsNotExist(err) {
			t.Fatalf("second's forward socket %s: %v", when, err)
		}
	}
	s.operatorCLI("route", "deactivate", "r-second")
	notOffered("after its deactivation")
	s.operatorCLI("route", "activate", "r-second")
	byAddress["requestId"] = "live-2"
	if d, res := call(t, ctx, cs, ToolCall, byAddress); res.IsError || d.Status != 200 {
		t.Fatalf("second's call after its activation: %+v", d)
	}
	s.operatorCLI("route", "remove", "r-second")
	notOffered("after its removal")
}

// TestRouteLookupHostDown: with the host down the route lookup fails, and
// the call is refused unavailable with the exact reason, nothing journaled
// (and so nothing sent), while a call an earlier attempt decides (a replay,
// a conflict) is answered from the controller's journal; the overview
// lists no application and says why.
// Once the host is back the same session's call goes through: the control
// channel is redialled.
func TestRouteLookupHostDown(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	first, res := call(t, ctx, cs, ToolCall, callArgs("warm", map[string]any{"text": "x"}))
	if res.IsError {
		t.Fatalf("first call: %+v", first)
	}
	s.stopHost()
	if err := <-s.hostDone; err != nil {
		t.Fatal(err)
	}
	s.stopHost = nil
	seq := s.lastSeq()
	d, res := call(t, ctx, cs, ToolCall, callArgs("down", map[string]any{"text": "x"}))
	if !res.IsError || d.Outcome != msg.StateRefused || d.Refusal == nil || d.Refusal.Code != msg.CodeUnavailable ||
		d.Refusal.Reason != "the host cannot be reached to look up its applications now; nothing was journaled or sent" || d.AttemptID != "" {
		t.Fatalf("call with the host down: %+v", d)
	}
	if got := s.lastSeq(); got != seq {
		t.Fatalf("the refused call journaled: last seq %d -> %d", seq, got)
	}
	// A call its recorded answer decides needs no route: the replay and
	// the conflict are answered with the host down, nothing journaled.
	if d, res := call(t, ctx, cs, ToolCall, callArgs("warm", map[string]any{"text": "x"})); res.IsError || !d.Replayed || d.Status != 200 ||
		d.AttemptID != first.AttemptID || d.ReceiptID != first.ReceiptID {
		t.Fatalf("replay with the host down: %+v, first %+v", d, first)
	}
	if d, _ := call(t, ctx, cs, ToolCall, callArgs("warm", map[string]any{"text": "y"})); d.Refusal == nil || d.Refusal.Code != msg.CodeConflict {
		t.Fatalf("conflict with the host down: %+v", d)
	}
	if got := s.lastSeq(); got != seq {
		t.Fatalf("the replay journaled: last seq %d -> %d", seq, got)
	}
	if ov := overviewOf(t, ctx, cs); len(ov.Applications) != 0 || ov.Limits.Note != overviewUnreachable {
		t.Fatalf("overview with the host down: %+v", ov)
	}
	s.startHost()
	if d, res := call(t, ctx, cs, ToolCall, callArgs("back", map[string]any{"text": "x"})); res.IsError || d.Status != 200 {
		t.Fatalf("call once the host is back: %+v", d)
	}
}

// BenchmarkLiveRouteLookup is what the live table adds to every tool call
// that needs a route: one routes round trip to the real host on a warm
// control channel, its one record already verified (Known), so the host
// sends its id alone.
func BenchmarkLiveRouteLookup(b *testing.B) {
	s := newStack(b, stackOpts{})
	c, err := open(s.cfgPath, slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.routeOf(ctx, "appliance"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.routeOf(ctx, "appliance"); err != nil {
			b.Fatal(err)
		}
	}
}
