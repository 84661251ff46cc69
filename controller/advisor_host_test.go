package controller

import (
	"context"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/internal/testaccount"
)

// advisorClientAs connects an MCP client to the stack's advisor socket
// through the real proxy binary run as account uid/gid.
func (s *stack) advisorClientAs(ctx context.Context, a testaccount.Account, group uint32) *mcp.ClientSession {
	s.t.Helper()
	cmd := exec.Command(controllerBin(s.t), "mcp", "--socket", s.cfg.Sockets.Advisor)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: []uint32{group}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "steward-test-advisor", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		s.t.Fatalf("advisor connect as uid %d: %v", a.UID, err)
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// asksOf calls steward_asks and checks its result as a client would.
func asksOf(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []AdvisorAsk {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolAsks, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("steward_asks: %v", err)
	}
	checkToolResult(t, ToolAsks, res)
	var a AsksAnswer
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &a)
	if res.IsError {
		t.Fatalf("steward_asks: %s", a.Reason)
	}
	return a.Asks
}

// advisorStack is a running stack whose config names four real accounts
// as the agents alpha, beta, rev and other, members of the agents' group
// (gid), serving the advisor socket; the operator's limits mark alpha's
// calls for approval with rev as advisor and a bound of 2 agent answers,
// and beta's with alpha as advisor. other is named by no limits.
func advisorStack(t *testing.T) (s *stack, alpha, beta, rev, other testaccount.Account, gid uint32) {
	t.Helper()
	group, gid := agentGroup(t)
	alpha = testaccount.New(t, "alpha", group)
	beta = testaccount.New(t, "beta", group)
	rev = testaccount.New(t, "rev", group)
	other = testaccount.New(t, "other", group)
	s = newStack(t, stackOpts{edit: func(m map[string]any) {
		withAdvisor(m)
		named := []any{}
		for _, a := range []struct {
			name string
			acct testaccount.Account
		}{{"alpha", alpha}, {"beta", beta}, {"rev", rev}, {"other", other}} {
			named = append(named, map[string]string{"name": a.name, "account": a.acct.Name})
		}
		m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": named}
	}})
	s.startController()
	s.openMCPTo(gid)
	for _, set := range [][]string{
		{"agent", "set", "alpha", "--controller", s.cfg.Name, "--approve-ops", "appliance/*", "--park", "1s", "--advisor", "rev", "--agent-answers", "2"},
		{"agent", "set", "beta", "--controller", s.cfg.Name, "--approve-ops", "appliance/*", "--park", "1s", "--advisor", "alpha"},
	} {
		if code, out := s.operatorCmd(set...); code != 0 {
			t.Fatalf("%v: exit %d: %s", set, code, out)
		}
	}
	return s, alpha, beta, rev, other, gid
}

// adviseAs answers ask with verdict through cs, checking the result as a
// client would; it returns the answer and its isError.
func adviseAs(t *testing.T, ctx context.Context, cs *mcp.ClientSession, ask, verdict string) (AdviseAnswer, bool) {
	t.Helper()
	a, res := adviseCall(t, ctx, cs, map[string]any{"ask": ask, "verdict": verdict, "sentence": "checked by the test"})
	return a, res.IsError
}

// TestAdvisorSocketRealHost: against the real host, which holds the
// operator's signed limits, a named agent no limits name an advisor is
// refused at the advisor socket with one JSON-RPC error answering its
// first request; an advisor is admitted, lists no asks while none is
// pending, and an answer to an ask the host does not have is refused as
// the host's approvals rules refuse it (accepted false, not an error),
// with nothing journaled by the controller.
func TestAdvisorSocketRealHost(t *testing.T) {
	s, _, _, rev, other, gid := advisorStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	seq := s.lastSeq()
	got := proxyOnce(t, s.cfg.Sockets.Advisor, &syscall.Credential{Uid: other.UID, Gid: other.GID, Groups: []uint32{gid}})
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"steward: agent \"other\" is not an advisor: no agent limits of this controller's operator name it one; the advisor socket serves only advisors"}}` + "\n"
	if got != want {
		t.Fatalf("other at the advisor socket:\n got %s\nwant %s", got, want)
	}
	cr := s.advisorClientAs(ctx, rev, gid)
	checkAdvisorToolList(t, ctx, cr)
	if asks := asksOf(t, ctx, cr); len(asks) != 0 {
		t.Fatalf("rev lists %+v with no ask raised", asks)
	}
	if a, isErr := adviseAs(t, ctx, cr, "ask-0123456789ab", "approve"); isErr || a.Accepted || a.Reason != "no ask ask-0123456789ab" || a.Ask != nil {
		t.Fatalf("an ask the host does not have: isError %v %+v", isErr, a)
	}
	if s.lastSeq() != seq {
		t.Fatal("the advisor socket journaled something in the controller")
	}
}
