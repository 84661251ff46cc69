package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// asksAllOf follows steward_asks' pages (next) to the end, checking each
// result as a client would.
func asksAllOf(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []AdvisorAsk {
	t.Helper()
	var all []AdvisorAsk
	args := map[string]any{}
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolAsks, Arguments: args})
		if err != nil {
			t.Fatalf("steward_asks: %v", err)
		}
		checkToolResult(t, ToolAsks, res)
		var a AsksAnswer
		json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &a)
		if res.IsError {
			t.Fatalf("steward_asks: %s", a.Reason)
		}
		all = append(all, a.Asks...)
		if a.Next == "" {
			return all
		}
		args = map[string]any{"after": a.Next}
	}
}

// floodReads is what the flood must leave working: the host's approvals
// list, list --all and event feed (the admin socket's requests, as
// `steward-operator approvals` sends them), the advisor's login and its
// list, and another agent's call. It returns the pending asks listed, the
// events read, and the advisor's asks.
func floodReads(t *testing.T, ctx context.Context, s *stack, ad *asksAdmin, advisorLogin func() *mcp.ClientSession, co *mcp.ClientSession, n int) (pending, events, advised int) {
	t.Helper()
	code, out := s.operatorCmd("approvals", "list")
	if code != 0 {
		t.Fatalf("approvals list: exit %d: %s", code, out)
	}
	pending = strings.Count(out, "\tpending\t")
	if code, out := s.operatorCmd("approvals", "list", "--all", "--json"); code != 0 || !json.Valid([]byte(out)) {
		t.Fatalf("approvals list --all: exit %d: %.300s", code, out)
	}
	for after := uint64(0); ; {
		rep := ad.do(ctx, admin.Request{Op: admin.OpApprovalsEvents, Approvals: &admin.ApprovalsRequest{After: after}})
		if rep.Approvals == nil || len(rep.Approvals.Events) == 0 {
			break
		}
		events += len(rep.Approvals.Events)
		after = rep.Approvals.Cursor
	}
	advised = len(asksAllOf(t, ctx, advisorLogin()))
	tr, res := call(t, ctx, co, ToolCall, callArgs(fmt.Sprintf("other-%d", n), map[string]any{"text": "unrelated"}))
	if res.IsError || tr.Outcome != msg.StateDefinite || tr.Status != 200 {
		t.Fatalf("another agent's call during the flood: %+v", tr)
	}
	return pending, events, advised
}

// TestAskFlood is the attacker's flood on the real daemons (real accounts,
// the real proxy, controller and host, the host's default caps): alpha,
// whose calls wait for approval, raises 130 asks of 60 KB each, 8 at a
// time, and beta (rev advises both) 16 more before it. alpha's first 16
// are pending and every other is refused with the per-agent bound's exact
// line, its ask never journaled; while it runs and after it, approvals
// list, list --all and the event feed answer (in pages: the 32 pending
// asks hold 1.9 MB, past one reply frame), the advisor logs in and lists
// every pending ask, and another agent's calls are answered.
func TestAskFlood(t *testing.T) {
	s, alpha, beta, rev, other, gid := advisorStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	if code, out := s.operatorCmd("agent", "set", "beta", "--controller", s.cfg.Name, "--approve-ops", "appliance/*", "--park", "1s", "--advisor", "rev"); code != 0 {
		t.Fatalf("agent set beta: exit %d: %s", code, out)
	}
	ad := &asksAdmin{t: t, s: s}
	ca := s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	co := s.agentClient(ctx, other.UID, other.GID, gid)
	login := func() *mcp.ClientSession { return s.advisorClientAs(ctx, rev, gid) }
	big := strings.Repeat("x", 60_000)
	cb := s.agentClient(ctx, beta.UID, beta.GID, gid)
	var bw sync.WaitGroup
	for i := range 16 {
		bw.Add(1)
		go func() {
			defer bw.Done()
			cb.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: callArgs(fmt.Sprintf("b%03d", i), map[string]any{"text": big})})
		}()
	}
	bw.Wait()

	const asks, workers = 130, 8
	jobs := make(chan int)
	type outcome struct {
		i   int
		tr  ToolResult
		err error
	}
	results := make(chan outcome, asks)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, err := ca.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall,
					Arguments: callArgs(fmt.Sprintf("f%03d", i), map[string]any{"text": fmt.Sprintf("%03d%s", i, big)})})
				o := outcome{i: i, err: err}
				if err == nil && len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						json.Unmarshal([]byte(tc.Text), &o.tr)
					}
				}
				results <- o
			}
		}()
	}
	go func() {
		for i := range asks {
			jobs <- i
		}
		close(jobs)
	}()
	// While the flood goes on: every read answers, another agent calls.
	floodReads(t, ctx, s, ad, login, co, 0)
	wg.Wait()
	close(results)

	bound := "16 asks of agent alpha are pending, the bound of pending asks per agent: a call needing approval is refused until one is answered or expires; nothing was journaled, reserved or sent"
	waiting, refused := 0, 0
	for o := range results {
		switch {
		case o.err != nil:
			t.Errorf("call %d: %v", o.i, o.err)
		case o.tr.Outcome == msg.StateAwaitingApproval:
			waiting++
		case o.tr.Outcome == msg.StateRefused && o.tr.Refusal != nil && o.tr.Refusal.Code == msg.CodeAgentLimit && o.tr.Refusal.Reason == bound:
			refused++
		default:
			t.Errorf("call %d: %+v (refusal %+v)", o.i, o.tr, o.tr.Refusal)
		}
	}
	if waiting != 16 || refused != asks-16 {
		t.Fatalf("%d calls wait for approval and %d are refused by the bound, want 16 and %d", waiting, refused, asks-16)
	}

	pending, events, advised := floodReads(t, ctx, s, ad, login, co, 1)
	if pending != 32 || events != 32 || advised != 32 {
		t.Fatalf("after the flood: list shows %d pending, the feed %d events, the advisor %d asks; want 32 each", pending, events, advised)
	}
	// The host journaled the 32 asks alone, and still serves after a restart.
	s.restartHost()
	if n := hosttest.Kinds(t, s.store); n[hostlog.KindAsk] != 32 {
		t.Fatalf("host journal: %d ask records, want 32", n[hostlog.KindAsk])
	}
	if pending, events, advised := floodReads(t, ctx, s, ad, login, co, 2); pending != 32 || events != 32 || advised != 32 {
		t.Fatalf("after a restart: %d pending, %d events, %d advised", pending, events, advised)
	}
}
