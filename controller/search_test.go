package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// search runs oracle_discover across applications and decodes its
// structured answer.
func search(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) (SearchResult, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolDiscover, Arguments: args})
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	var r SearchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("discover's structured content %s: %v", b, err)
	}
	return r, res
}

func textOf(res *mcp.CallToolResult) string {
	if len(res.Content) != 1 {
		return ""
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return ""
	}
	return tc.Text
}

// wantRefused checks that a tool call was refused with exactly reason
// and that nothing was journaled for it.
func (s *stack) wantRefused(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, reason string) {
	t.Helper()
	seq := s.lastSeq()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var r ToolResult
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &r)
	if !res.IsError || r.Outcome != msg.StateRefused || r.Refusal == nil || r.Refusal.Code != msg.CodeBadRequest || r.Refusal.Reason != reason {
		t.Errorf("%v: %+v %+v, want refused: %s", args, r, r.Refusal, reason)
	}
	if s.lastSeq() != seq {
		t.Errorf("%v: a refused call journaled records %d..%d", args, seq+1, s.lastSeq())
	}
}

// TestAddressCall: oracle_call and oracle_discover by address on a host
// with two applications; an address that disagrees with application or
// operationId, names another host or is past its bound is refused with
// nothing journaled; this host's own name as node is accepted.
func TestAddressCall(t *testing.T) {
	s := newStack(t, stackOpts{more: []stackApp{{name: "second", price: 7}}})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}

	before := s.purse()
	r, res := call(t, ctx, cs, ToolCall, map[string]any{"address": "second/calc.evaluate", "requestId": "a1", "conversationId": "c1",
		"arguments": map[string]any{"expression": "6*7"}})
	if res.IsError || r.Outcome != msg.StateDefinite || r.Status != 200 || !strings.Contains(string(listingBytes(&r)), `"42"`) || r.Charge == nil || *r.Charge != 7 {
		t.Fatalf("call by address: %+v", r)
	}
	// The same requestId of the other application is its own call.
	r, _ = call(t, ctx, cs, ToolCall, map[string]any{"address": host + "/appliance/calc.evaluate", "application": "appliance",
		"operationId": "calc.evaluate", "requestId": "a1", "conversationId": "c1", "arguments": map[string]any{"expression": "6*7"}})
	if r.Outcome != msg.StateDefinite || r.Status != 200 || r.Replayed || r.Charge == nil || *r.Charge != s.price {
		t.Fatalf("call by this host's node, application and operationId: %+v", r)
	}
	if p := s.purse(); p.Balance != before.Balance-7-s.price {
		t.Fatalf("balance %d -> %d, want the two grants' prices %d and %d", before.Balance, p.Balance, 7, s.price)
	}
	d, res := call(t, ctx, cs, ToolDiscover, map[string]any{"address": "second/units.convert"})
	if res.IsError || d.Status != 200 || !strings.Contains(string(listingBytes(&d)), `"id":"units.convert"`) {
		t.Fatalf("describe by address: %+v", d)
	}

	call := map[string]any{"requestId": "a2", "conversationId": "c1", "arguments": map[string]any{"expression": "1"}}
	with := func(kv ...string) map[string]any {
		m := map[string]any{}
		for k, v := range call {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	s.wantRefused(t, ctx, cs, ToolCall, with("address", "second/calc.evaluate", "application", "appliance"),
		`arguments refused: address second/calc.evaluate names application second but application is "appliance": give one, or both alike`)
	s.wantRefused(t, ctx, cs, ToolCall, with("address", "second/calc.evaluate", "operationId", "units.convert"),
		`arguments refused: address second/calc.evaluate names operation calc.evaluate but operationId is "units.convert": give one, or both alike`)
	s.wantRefused(t, ctx, cs, ToolDiscover, map[string]any{"address": "second/calc.evaluate", "application": "appliance"},
		`arguments refused: address second/calc.evaluate names application second but application is "appliance": give one, or both alike`)
	s.wantRefused(t, ctx, cs, ToolCall, with("address", "x"+host+"/second/calc.evaluate"),
		"arguments refused: node x"+host+" is not this host ("+host+"): steward reaches only its own host's applications today")
	s.wantRefused(t, ctx, cs, ToolCall, call,
		"arguments refused: application: missing: give address (APPLICATION/OPERATION), or application and operationId")
	s.wantRefused(t, ctx, cs, ToolCall, with("address", "third/calc.evaluate"),
		`arguments refused: application: "third" is not an application of this controller (steward_overview lists them)`)
	// The address bound, one past: the longest application name, "/"
	// and an operation id one byte past its own bound.
	long := strings.Repeat("a", MaxApplicationLen) + "/o" + strings.Repeat("p", 160)
	if len(long) != MaxAddressLen+1 {
		t.Fatalf("%d bytes", len(long))
	}
	s.wantRefused(t, ctx, cs, ToolCall, with("address", long), "arguments refused: address: APPLICATION/OPERATION of 226 bytes exceeds the bound of 225")
	s.wantRefused(t, ctx, cs, ToolCall, with("address", strings.Repeat("n", MaxNodeLen+1)+"/second/calc.evaluate"),
		`arguments refused: address: node name "`+strings.Repeat("n", MaxNodeLen+1)+`" must be 1 to 64 bytes`)
}

// TestSearchAcrossApplications: oracle_discover without an application
// lists every application, each its own attempt charged per its own
// grant, and merges the matches ranked, the closest with its schema.
func TestSearchAcrossApplications(t *testing.T) {
	s := newStack(t, stackOpts{discovery: 1, more: []stackApp{{name: "second", price: 7, discovery: 3, operations: []string{"units.*", "calc.*"}}}})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	before, seq := s.purse(), s.lastSeq()
	r, res := search(t, ctx, cs, map[string]any{"query": "units", "availability": "any"})
	if res.IsError || r.Outcome != msg.StateDefinite {
		t.Fatalf("search: %+v", r)
	}
	// Two attempts (a begin and a result each), two receipts, each
	// charged its grant's discovery price.
	if got := s.lastSeq() - seq; got != 4 {
		t.Fatalf("the search journaled %d records, want 2 begins and 2 results", got)
	}
	if len(r.Applications) != 2 {
		t.Fatalf("applications %+v", r.Applications)
	}
	for i, want := range []struct {
		app    string
		charge uint64
	}{{"appliance", 1}, {"second", 3}} {
		a := r.Applications[i]
		if a.Application != want.app || a.Outcome != msg.StateDefinite || a.AttemptID == "" || a.ReceiptID == "" || a.Charge == nil || *a.Charge != want.charge || a.Refusal != nil {
			t.Errorf("application %d: %+v, want %s charged %d", i, a, want.app, want.charge)
		}
	}
	if r.Applications[0].AttemptID == r.Applications[1].AttemptID || r.Applications[0].ReceiptID == r.Applications[1].ReceiptID {
		t.Fatalf("one attempt for two applications: %+v", r.Applications)
	}
	if r.Charge == nil || *r.Charge != 4 {
		t.Fatalf("search charged %v, want 4", r.Charge)
	}
	if p := s.purse(); p.Balance != before.Balance-4 {
		t.Fatalf("balance %d -> %d, want 4 less", before.Balance, p.Balance)
	}
	// Ranked: ids starting with the query first (each application's own
	// order, the applications taking turns), then ids, titles or
	// descriptions containing it, then what only the application's own
	// search found (the appliance's searches units as well). The second
	// application's grant covers units.* and calc.* alone, and the host
	// lists no more than it covers.
	var got []string
	for _, m := range r.Matches {
		got = append(got, m.Address+" "+m.Availability)
		if m.Address != m.Application+"/"+m.OperationID || m.Title == "" {
			t.Errorf("match %+v", m)
		}
	}
	want := []string{
		"appliance/units.convert live_direct", "second/units.convert live_direct",
		"appliance/units.currency unavailable", "second/units.currency unavailable",
	}
	if len(got) < len(want) || strings.Join(got[:len(want)], ",") != strings.Join(want, ",") {
		t.Fatalf("matches %v, want first %v", got, want)
	}
	for _, m := range r.Matches[len(want):] {
		if m.Application == "second" && !strings.HasPrefix(m.OperationID, "calc.") {
			t.Errorf("second lists %s, which its grant does not cover", m.OperationID)
		}
	}
	if r.Closest == nil || r.Closest.Address != "appliance/units.convert" || r.Closest.Title != "Convert a quantity between units" ||
		!strings.Contains(string(r.Closest.InputSchema), `"from"`) || r.Closest.Description == "" {
		t.Fatalf("closest %+v", r.Closest)
	}
	text := textOf(res)
	lines := strings.Split(text, "\n")
	if len(lines) < len(r.Matches)+2 || lines[0] != "appliance/units.convert  Convert a quantity between units [live_direct]" ||
		lines[len(r.Matches)+1] != "closest: appliance/units.convert, input schema:" || !strings.Contains(text, `"from": {`) {
		t.Fatalf("text:\n%s", text)
	}

	// limit caps the merged matches; an exact id ranks first.
	r, _ = search(t, ctx, cs, map[string]any{"query": "calc.evaluate", "limit": 1})
	if len(r.Matches) != 1 || r.Matches[0].Address != "appliance/calc.evaluate" || r.Closest.Address != "appliance/calc.evaluate" {
		t.Fatalf("limit 1: %+v", r.Matches)
	}
	// An id starting with the query before a description containing it;
	// within a rank each application's own order, the second
	// application's first operation before the appliance's third.
	r, _ = search(t, ctx, cs, map[string]any{"query": "time", "availability": "any"})
	got = got[:0]
	for _, m := range r.Matches {
		got = append(got, m.Address)
	}
	if strings.Join(got, ",") != "appliance/time.duration,second/units.convert,appliance/units.convert" {
		t.Fatalf("time: %v", got)
	}
	r, _ = search(t, ctx, cs, map[string]any{"query": "no such thing"})
	if r.Outcome != msg.StateDefinite || len(r.Matches) != 0 || r.Closest != nil || len(r.Applications) != 2 {
		t.Fatalf("no match: %+v", r)
	}

	// Paging is per application; the search's bounds are a listing's,
	// one past each.
	s.wantRefused(t, ctx, cs, ToolDiscover, map[string]any{"query": "units", "offset": 0},
		"arguments refused: offset: a search across applications is not paged (paging is per application: give application)")
	s.wantRefused(t, ctx, cs, ToolDiscover, map[string]any{"query": "units", "limit": 51}, "arguments refused: limit: 51 exceeds the bound of 50")
	s.wantRefused(t, ctx, cs, ToolDiscover, map[string]any{"query": strings.Repeat("q", 257)}, "arguments refused: query: 257 bytes exceeds the bound of 256")
	s.wantRefused(t, ctx, cs, ToolDiscover, map[string]any{"query": "units", "availability": "some"},
		`arguments refused: availability: "some" is not one of live_direct, text_only, unavailable, any`)
	s.wantRefused(t, ctx, cs, ToolDiscover, map[string]any{"query": "units", "timeoutMs": s.cfg.MaxTimeoutMs() + 1},
		"arguments refused: timeoutMs: 300001 is outside 2000 to 300000 ms (the host holds a deadline only to within 2000 ms)")
}

// TestSearchOneUnreachable: an application the host cannot reach is
// reported as such in its own entry, and the others' matches are still
// answered, not as an error; when none can be reached the search is.
func TestSearchOneUnreachable(t *testing.T) {
	s := newStack(t, stackOpts{more: []stackApp{{name: "gone", noApp: true}, {name: "second"}}})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	r, res := search(t, ctx, cs, map[string]any{"query": "sha"})
	if res.IsError || r.Outcome != msg.StateDefinite || len(r.Applications) != 3 {
		t.Fatalf("search: %+v", r)
	}
	gone := r.Applications[1]
	if gone.Application != "gone" || (gone.Outcome != msg.StateRefused && gone.Outcome != msg.StateNotSent) || gone.AttemptID == "" {
		t.Fatalf("the unreachable application: %+v", gone)
	}
	var got []string
	for _, m := range r.Matches {
		got = append(got, m.Address)
	}
	if strings.Join(got, ",") != "appliance/text.sha256,second/text.sha256" {
		t.Fatalf("matches %v", got)
	}
	if text := textOf(res); !strings.Contains(text, "\ngone: not searched: "+string(gone.Outcome)) {
		t.Fatalf("the text does not say gone was not searched:\n%s", text)
	}
}

// TestSearchNoneReachable: a search no application answered is an error.
func TestSearchNoneReachable(t *testing.T) {
	s := newStack(t, stackOpts{noApp: true, more: []stackApp{{name: "gone", noApp: true}}})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	r, res := search(t, ctx, cs, map[string]any{"query": "sha"})
	if !res.IsError || r.Outcome != msg.StateRefused || r.Refusal == nil || len(r.Applications) != 2 || len(r.Matches) != 0 {
		t.Fatalf("search: %+v", r)
	}
	if want := "none of the 2 applications answered the search: each one's outcome is in applications"; r.Refusal.Reason != want {
		t.Fatalf("refusal %+v, want %s", r.Refusal, want)
	}
	if !strings.HasPrefix(textOf(res), "refused (") {
		t.Fatalf("text %s", textOf(res))
	}
}

// listed is a definite listing answer of ops (id and title, the title
// also the description), as a dispatch reports it.
func listed(t *testing.T, next string, ops ...string) *ToolResult {
	t.Helper()
	var ds []string
	for i := 0; i < len(ops); i += 2 {
		d, _ := json.Marshal(map[string]any{"id": ops[i], "title": ops[i+1], "description": ops[i+1], "availability": "live_direct",
			"input_schema": map[string]any{"type": "object"}, "units": []string{}, "sources": []string{}, "examples": []any{}})
		ds = append(ds, string(d))
	}
	zero := uint64(0)
	return &ToolResult{Outcome: msg.StateDefinite, Status: 200, AttemptID: "att-" + ops[0], ReceiptID: "rc", Charge: &zero,
		Body: json.RawMessage(`{"limits":{"request_bytes":65536},"next_offset":` + next + `,"operations":[` + strings.Join(ds, ",") + `]}`)}
}

// TestMergeSearch ranks what the applications answered: an exact id, an
// id prefix, an id, title or description containing the query (without
// regard to case), then the rest, each application's own order within a
// rank; caps at the limit; and reports each application's own outcome.
func TestMergeSearch(t *testing.T) {
	routes := []msg.RouteRecord{{Application: "a"}, {Application: "b"}, {Application: "c"}, {Application: "d"}, {Application: "e"}}
	results := []*ToolResult{
		listed(t, "null", "other.op", "Something else", "sum.total", "Adds a list", "x.sum", "Contains SUM"),
		listed(t, "7", "sum", "The exact one", "sumx", "A prefix"),
		refused(msg.CodeNoGrant, "no grant covers application c", "att-c"),
		{Outcome: msg.StateDefinite, Status: 404, AttemptID: "att-d", Body: json.RawMessage(`{"error":"gone"}`)},
		{Outcome: msg.StateDefinite, Status: 200, AttemptID: "att-e", Body: json.RawMessage(`{"operations":[]}`)},
	}
	r := mergeSearch(oracleops.ListQuery{Query: "Sum", Limit: 5}, routes, results)
	var got []string
	for _, m := range r.Matches {
		got = append(got, m.Address)
	}
	if want := "b/sum,a/sum.total,b/sumx,a/x.sum,a/other.op"; strings.Join(got, ",") != want {
		t.Fatalf("matches %v, want %s", got, want)
	}
	if r.Outcome != msg.StateDefinite || r.Closest.Address != "b/sum" || string(r.Closest.InputSchema) != `{"type":"object"}` {
		t.Fatalf("%+v %+v", r, r.Closest)
	}
	r = mergeSearch(oracleops.ListQuery{Query: "sum", Limit: 2}, routes, results)
	if len(r.Matches) != 2 {
		t.Fatalf("limit 2: %+v", r.Matches)
	}
	wantDetail := []string{
		"",
		"more operations match: oracle_discover with application b and offset 7 shows them",
		"",
		"not searched: the application answered status 404",
		`not searched: the application's listing could not be read: list reply: missing member "next_offset"`,
	}
	for i, a := range r.Applications {
		if a.Application != routes[i].Application || a.AttemptID != results[i].AttemptID || a.Detail != wantDetail[i] {
			t.Errorf("application %d: %+v, want detail %q", i, a, wantDetail[i])
		}
	}
	if r.Applications[2].Outcome != msg.StateRefused || r.Applications[2].Refusal.Code != msg.CodeNoGrant {
		t.Fatalf("%+v", r.Applications[2])
	}
	text := r.toolResult()
	if text.IsError || !strings.Contains(textOf(text), "\nc: not searched: refused (no-grant): no grant covers application c\nd: not searched: the application answered status 404\n") {
		t.Fatalf("text:\n%s", textOf(text))
	}
	// Every application failed: an error, with their common code.
	r = mergeSearch(oracleops.ListQuery{Query: "sum", Limit: 2}, routes[2:3], results[2:3])
	if r.Outcome != msg.StateRefused || r.Refusal.Code != msg.CodeNoGrant || !r.toolResult().IsError {
		t.Fatalf("%+v", r)
	}
	r = mergeSearch(oracleops.ListQuery{Query: "sum", Limit: 2}, nil, nil)
	if r.Outcome != msg.StateRefused || r.Refusal.Reason != "no application is reachable: the host offers this controller no route; nothing was sent" {
		t.Fatalf("%+v", r.Refusal)
	}
}

// BenchmarkSearch measures a search across applications against one
// application's discovery, on a real host: each application searched is
// one more attempt (two fsynced journal records on each side).
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime=200x ./controller/
func BenchmarkSearch(b *testing.B) {
	for _, v := range []struct {
		name string
		apps int
		args map[string]any
	}{
		{"one-application", 1, map[string]any{"application": "appliance", "query": "sha"}},
		{"across-1", 1, map[string]any{"query": "sha"}},
		{"across-2", 2, map[string]any{"query": "sha"}},
		{"across-4", 4, map[string]any{"query": "sha"}},
		{"across-8", 8, map[string]any{"query": "sha"}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var more []stackApp
			for i := 1; i < v.apps; i++ {
				more = append(more, stackApp{name: fmt.Sprintf("app%d", i)})
			}
			s := newStack(b, stackOpts{more: more})
			s.startController()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cs := s.client(ctx)
			for b.Loop() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolDiscover, Arguments: v.args})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}

// TestSearchWithinAgentLimits: a search across applications asks only the
// applications the operator's limits for the agent name an operation of
// (as the host reports them): the other is in the answer as not searched,
// with no attempt, no host record and no charge, and an application the
// limits allow is searched as before.
func TestSearchWithinAgentLimits(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOpts{more: []stackApp{{name: "second", price: 7}}, edit: func(m map[string]any) {
		m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": []any{
			map[string]string{"name": "solo", "account": me.Username},
		}}
	}})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if code, out := s.operatorCmd("agent", "set", "solo", "--controller", s.cfg.Name, "--operations", "appliance/*"); code != 0 {
		t.Fatalf("agent set: exit %d: %s", code, out)
	}
	cs := s.client(ctx)
	before, receipts := s.purse(), s.receiptsByAgent()["solo"]
	sr, res := search(t, ctx, cs, map[string]any{"query": "calc"})
	if res.IsError || len(sr.Applications) != 2 {
		t.Fatalf("search: isError %v, %+v", res.IsError, sr)
	}
	for _, a := range sr.Applications {
		switch a.Application {
		case "appliance":
			if a.Outcome != msg.StateDefinite || a.AttemptID == "" || a.ReceiptID == "" {
				t.Fatalf("appliance, which the limits allow: %+v", a)
			}
		case "second":
			if a.Outcome != msg.StateRefused || a.AttemptID != "" || a.ReceiptID != "" || a.Refusal == nil ||
				a.Refusal.Code != msg.CodeAgentLimit || a.Refusal.Reason != notInLimits {
				t.Fatalf("second, which the limits exclude: %+v %+v", a, a.Refusal)
			}
		}
	}
	for _, m := range sr.Matches {
		if m.Application != "appliance" {
			t.Fatalf("a match of an application not searched: %+v", m)
		}
	}
	// One listing on the host, one receipt, and none for second;
	// discovery is free here, so nothing is charged.
	if p := s.purse(); p.Balance != before.Balance {
		t.Fatalf("balance %d -> %d", before.Balance, p.Balance)
	}
	if n := s.receiptsByAgent()["solo"] - receipts; n != 1 {
		t.Fatalf("the search left %d receipts, want appliance's one", n)
	}
}
