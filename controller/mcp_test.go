package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/wire/msg"
)

func callArgs(reqID string, args map[string]any) map[string]any {
	return map[string]any{"application": "appliance", "requestId": reqID, "conversationId": "conv-1",
		"operationId": "text.sha256", "arguments": args}
}

func TestMCPToolsDiscoverCallReplayConflict(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	// tools/list: exactly the three, and nothing of sockets, routes or keys.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"oracle_call", "oracle_discover", "steward_overview"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	listing, _ := json.Marshal(lt)
	for _, secret := range []string{s.dir, ".sock", "r-appliance", "kid", "grant"} {
		if strings.Contains(string(listing), secret) {
			t.Fatalf("tools/list shows %q: %s", secret, listing)
		}
	}

	var ov Overview
	_, res := call(t, ctx, cs, ToolOverview, map[string]any{})
	if res.IsError {
		t.Fatalf("overview: %+v", res)
	}
	ovText := res.Content[0].(*mcp.TextContent).Text
	if err := json.Unmarshal([]byte(ovText), &ov); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ovText, `"application":"appliance"`) || !strings.Contains(ovText, `"availability":"reachable"`) || strings.Contains(ovText, s.dir) {
		t.Fatalf("overview %s", ovText)
	}
	if !ov.Payer.Policy || ov.Payer.MaxPerCall != 1<<20 || ov.Payer.RemainingToday != ov.Payer.PerDay || ov.Payer.Day != time.Now().UTC().Format(time.DateOnly) {
		t.Fatalf("overview's payer %+v", ov.Payer)
	}

	// Discovery: a search and one descriptor, free (no discovery price).
	before := s.purse()
	d, res := call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance", "query": "sha"})
	if res.IsError || d.Outcome != msg.StateDefinite || d.Status != 200 || !strings.Contains(string(d.Body), `"id":"text.sha256"`) || d.AttemptID == "" || d.ReceiptID == "" {
		t.Fatalf("discover: %+v", d)
	}
	d, res = call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance", "operationId": "text.sha256"})
	if res.IsError || d.Status != 200 || !strings.Contains(string(d.Body), `"id":"text.sha256"`) {
		t.Fatalf("describe: %+v", d)
	}
	// The price of a call is visible before calling: the grant's.
	if d.CallPrice == nil || *d.CallPrice != s.price {
		t.Fatalf("describe's callPrice %v, want the grant's price %d", d.CallPrice, s.price)
	}
	if p := s.purse(); p.Balance != before.Balance {
		t.Fatalf("discovery charged: %d -> %d", before.Balance, p.Balance)
	}

	// A call, charged once.
	c1, res := call(t, ctx, cs, ToolCall, callArgs("req-1", map[string]any{"text": "hello"}))
	if res.IsError || c1.Outcome != msg.StateDefinite || c1.Status != 200 || c1.ReceiptID == "" || c1.Replayed {
		t.Fatalf("call: %+v", c1)
	}
	after := s.purse()
	if after.Balance != before.Balance-s.price {
		t.Fatalf("balance %d -> %d, want a charge of %d", before.Balance, after.Balance, s.price)
	}

	// Replay: the same requestId and arguments answer the recorded result,
	// nothing dispatched, journaled or charged.
	seq := s.lastSeq()
	c2, res := call(t, ctx, cs, ToolCall, callArgs("req-1", map[string]any{"text": "hello"}))
	if res.IsError || !c2.Replayed || c2.ReceiptID != c1.ReceiptID || c2.AttemptID != c1.AttemptID || !bytes.Equal(c2.Body, c1.Body) {
		t.Fatalf("replay: %+v vs %+v", c2, c1)
	}
	if s.lastSeq() != seq {
		t.Fatal("a replay journaled something")
	}
	if p := s.purse(); p.Balance != after.Balance {
		t.Fatalf("replay charged: %d -> %d", after.Balance, p.Balance)
	}

	// Conflict: same requestId, different arguments; nothing journaled.
	c3, res := call(t, ctx, cs, ToolCall, callArgs("req-1", map[string]any{"text": "other"}))
	if !res.IsError || c3.Refusal == nil || c3.Refusal.Code != msg.CodeConflict {
		t.Fatalf("conflict: %+v", c3)
	}
	if s.lastSeq() != seq {
		t.Fatal("a conflict journaled something")
	}
	if p := s.purse(); p.Balance != after.Balance {
		t.Fatal("a conflict was charged")
	}

	// An application's own refusal is a definite answer, with its status
	// and body, and a tool error: not the application's success.
	c4, res := call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance", "operationId": "no.such.op"})
	if !res.IsError || c4.Outcome != msg.StateDefinite || c4.Status != 404 || len(c4.Body) == 0 {
		t.Fatalf("app refusal: %+v isError=%v", c4, res.IsError)
	}
}
