package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/foreground"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestMCPBounds sends each bound of DESIGN.md section 8 at the limit and one
// past it through MCP: at the limit the call is journaled and dispatched,
// one past it is refused naming the bound and nothing is journaled.
func TestMCPBounds(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cs := s.client(ctx)

	id := func(n int, c string) string { return strings.Repeat(c, n) }
	cases := []struct {
		name      string
		tool      string
		ok, over  map[string]any
		wantError string
	}{
		{"requestId", ToolCall,
			callArgs(id(80, "a"), map[string]any{"text": "x"}), callArgs(id(81, "b"), map[string]any{"text": "x"}),
			"requestId: 81 bytes exceeds the bound of 80"},
		{"conversationId", ToolCall,
			map[string]any{"application": "appliance", "requestId": "conv-ok", "conversationId": id(80, "c"), "operationId": "text.sha256", "arguments": map[string]any{}},
			map[string]any{"application": "appliance", "requestId": "conv-over", "conversationId": id(81, "c"), "operationId": "text.sha256", "arguments": map[string]any{}},
			"conversationId: 81 bytes exceeds the bound of 80"},
		{"operationId", ToolDiscover,
			map[string]any{"application": "appliance", "operationId": id(160, "o")},
			map[string]any{"application": "appliance", "operationId": id(161, "o")},
			"operationId: 161 bytes exceeds the bound of 160"},
		{"query", ToolDiscover,
			map[string]any{"application": "appliance", "query": id(256, "q")},
			map[string]any{"application": "appliance", "query": id(257, "q")},
			"query: 257 bytes exceeds the bound of 256"},
		{"query utf-8", ToolDiscover,
			map[string]any{"application": "appliance", "query": id(128, "é")},
			map[string]any{"application": "appliance", "query": id(128, "é") + "q"},
			"query: 257 bytes exceeds the bound of 256"},
		{"limit", ToolDiscover,
			map[string]any{"application": "appliance", "limit": 50},
			map[string]any{"application": "appliance", "limit": 51},
			"limit: 51 exceeds the bound of 50"},
		{"timeoutMs", ToolCall,
			withArg(callArgs("timeout-max", map[string]any{"text": "x"}), "timeoutMs", 300_000),
			withArg(callArgs("timeout-over", map[string]any{"text": "x"}), "timeoutMs", 300_001),
			"timeoutMs: 300001 is outside 2000 to 300000 ms (the host holds a deadline only to within 2000 ms)"},
		{"timeoutMs low", ToolDiscover,
			map[string]any{"application": "appliance", "timeoutMs": 2000},
			map[string]any{"application": "appliance", "timeoutMs": 1999},
			"timeoutMs: 1999 is outside 2000 to 300000 ms (the host holds a deadline only to within 2000 ms)"},
		{"limit low", ToolDiscover,
			map[string]any{"application": "appliance", "limit": 1},
			map[string]any{"application": "appliance", "limit": 0},
			"limit: 0 is below the minimum of 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seq := s.lastSeq()
			r, res := call(t, ctx, cs, tc.tool, tc.ok)
			if r.AttemptID == "" || r.Outcome != msg.StateDefinite {
				t.Fatalf("at the limit: %+v isError=%v", r, res.IsError)
			}
			if s.lastSeq() != seq+2 {
				t.Fatalf("at the limit: journal moved %d -> %d, want begin and result", seq, s.lastSeq())
			}
			seq = s.lastSeq()
			r, res = call(t, ctx, cs, tc.tool, tc.over)
			if !res.IsError || r.Refusal == nil || r.Refusal.Code != msg.CodeBadRequest || !strings.Contains(r.Refusal.Reason, tc.wantError) || r.AttemptID != "" {
				t.Fatalf("one past: %+v, want a refusal containing %q", r, tc.wantError)
			}
			if s.lastSeq() != seq {
				t.Fatal("one past the bound: something was journaled")
			}
		})
	}
}

// TestForegroundBounds checks the invocation body bound (65,536 bytes, only
// reachable through the foreground socket since an MCP line is bounded to
// the same size) and the foreground frame bound (262,144 bytes), and the
// submit/result/ack cycle.
func TestForegroundBounds(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sock := s.cfg.Sockets.Foreground

	// An invocation body of exactly n bytes: the canonical body is
	// {"arguments":{"text":"..."},"conversationId":"SCOPED","operationId":"text.sha256","requestId":"SCOPED"}
	// with the foreground's scoped requestId and conversationId
	// (ScopedRequestID, ScopedConversationID, 44 bytes each).
	bodyArgs := func(reqID string, n int) []byte {
		fixed := len(`{"arguments":{"text":""},"conversationId":"","operationId":"text.sha256","requestId":""}`) +
			len(ScopedRequestID(ctlconf.PrincipalForeground, reqID)) + len(oracleops.ScopedConversationID(ctlconf.PrincipalForeground, "c"))
		b, _ := json.Marshal(map[string]any{"application": "appliance", "requestId": reqID, "conversationId": "c",
			"operationId": "text.sha256", "arguments": map[string]any{"text": strings.Repeat("t", n-fixed)}})
		return b
	}
	seq := s.lastSeq()
	rep, err := foreground.Call(ctx, sock, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpSubmit, Tool: ToolCall, Arguments: bodyArgs("fg-1", 65536)})
	if err != nil {
		t.Fatal(err)
	}
	var tr ToolResult
	json.Unmarshal(rep.Result, &tr)
	if rep.State != foreground.StateDone || tr.Outcome != msg.StateDefinite || tr.Status != 200 {
		t.Fatalf("body at the bound: %+v %+v", rep, tr)
	}
	if got := s.lastSeq(); got != seq+4 {
		t.Fatalf("journal moved %d -> %d, want fg-submit, begin, result, fg-result", seq, got)
	}
	// result, then ack, then the result is gone.
	rep2, err := foreground.Call(ctx, sock, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpResult, ID: rep.ID})
	if err != nil || string(rep2.Result) != string(rep.Result) {
		t.Fatalf("result: %v %+v", err, rep2)
	}
	if _, err := foreground.Call(ctx, sock, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpAck, ID: rep.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := foreground.Call(ctx, sock, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpResult, ID: rep.ID}); !errors.Is(err, foreground.ErrRefused) {
		t.Fatalf("result after ack: %v", err)
	}

	seq = s.lastSeq()
	_, err = foreground.Call(ctx, sock, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpSubmit, Tool: ToolCall, Arguments: bodyArgs("fg-2", 65537)})
	if !errors.Is(err, foreground.ErrRefused) || !strings.Contains(err.Error(), "invocation body: 65537 bytes exceeds the bound of 65536") {
		t.Fatalf("body one past: %v", err)
	}
	if s.lastSeq() != seq {
		t.Fatal("body one past the bound: journaled")
	}

	// The frame bound: a request frame of exactly 262,144 bytes is read
	// (and then refused for its arguments), one of 262,145 is refused by
	// the frame bound. Neither journals anything.
	frameArgs := func(n int) foreground.Request {
		r := foreground.Request{Op: foreground.OpSubmit, Tool: ToolCall}
		for pad := n - 64; ; pad++ {
			r.Arguments = []byte(`{"pad":"` + strings.Repeat("p", pad) + `"}`)
			b, _ := wire.Marshal(r)
			if len(b) == n {
				return r
			}
			if len(b) > n {
				t.Fatalf("cannot build a frame of %d bytes", n)
			}
		}
	}
	_, err = foreground.Call(ctx, sock, uint32(os.Geteuid()), frameArgs(wire.MaxRequestFrame))
	if !errors.Is(err, foreground.ErrRefused) || !strings.Contains(err.Error(), `unknown field "pad"`) {
		t.Fatalf("frame at the bound: %v", err)
	}
	_, err = foreground.Call(ctx, sock, uint32(os.Geteuid()), frameArgs(wire.MaxRequestFrame+1))
	if !errors.Is(err, foreground.ErrRefused) || !strings.Contains(err.Error(), "frame of 262145 bytes exceeds the request frame bound of 262144 bytes") {
		t.Fatalf("frame one past: %v", err)
	}
	if s.lastSeq() != seq {
		t.Fatal("frame bound: journaled")
	}
}
