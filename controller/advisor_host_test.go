package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
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

// TestAdvisorJourney: real accounts through the real proxy, controller and
// host. The operator marks alpha's calls for approval, naming rev its
// advisor with a bound of 2 agent answers, and beta's, naming alpha. Each
// of alpha's calls in one conversation raises an ask; rev lists them with
// what was asked, approves one and denies one (the bound's N), a wait is
// taken and not counted, and the next answer is refused by the bound
// (accepted false, isError false) in the host's exact words, the ask left
// pending; an answered ask is refused as already answered. alpha, an
// advisor of beta's asks, cannot answer its own. other, a named agent no
// limits name an advisor, is refused at the socket.
func TestAdvisorJourney(t *testing.T) {
	s, alpha, beta, rev, _, gid := advisorStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// alpha's four calls in conv-1 and beta's one each raise an ask.
	ca := s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	for i := range 4 {
		call(t, ctx, ca, ToolCall, callArgs(fmt.Sprintf("a%d", i), map[string]any{"text": fmt.Sprintf("call %d", i)}))
	}
	cb := s.agentClient(ctx, beta.UID, beta.GID, gid)
	call(t, ctx, cb, ToolCall, callArgs("b0", map[string]any{"text": "beta's"}))

	cr := s.advisorClientAs(ctx, rev, gid)
	asks := asksOf(t, ctx, cr)
	if len(asks) != 4 {
		t.Fatalf("rev lists %d asks, want alpha's 4: %+v", len(asks), asks)
	}
	for i, a := range asks {
		// The host knows the conversation the application sees: alpha's
		// conv-1, scoped to alpha.
		if a.Agent != "alpha" || a.Conversation != "conv-1" || a.Application != "appliance" || a.Operation != "text.sha256" ||
			a.State != "pending" || a.Price != s.price || !strings.Contains(string(a.Arguments), fmt.Sprintf(`"call %d"`, i)) {
			t.Errorf("ask %d: %+v (arguments %s)", i, a, a.Arguments)
		}
		if _, err := time.Parse(time.RFC3339, a.RaisedAt); err != nil {
			t.Errorf("ask %d raisedAt %q: %v", i, a.RaisedAt, err)
		}
		if _, err := time.Parse(time.RFC3339, a.ExpiresAt); err != nil {
			t.Errorf("ask %d expiresAt %q: %v", i, a.ExpiresAt, err)
		}
	}
	advise := func(cs *mcp.ClientSession, ask, verdict string) (AdviseAnswer, bool) {
		t.Helper()
		return adviseAs(t, ctx, cs, ask, verdict)
	}
	if a, isErr := advise(cr, asks[0].ID, "approve"); isErr || !a.Accepted || a.Ask == nil || a.Ask.State != "approved" {
		t.Fatalf("the first approve: isError %v %+v", isErr, a)
	}
	if a, isErr := advise(cr, asks[1].ID, "wait"); isErr || !a.Accepted || a.Ask == nil || a.Ask.State != "pending" {
		t.Fatalf("a wait: isError %v %+v", isErr, a)
	}
	if a, isErr := advise(cr, asks[1].ID, "deny"); isErr || !a.Accepted || a.Ask == nil || a.Ask.State != "denied" {
		t.Fatalf("a deny, the bound's second answer (the wait did not count): isError %v %+v", isErr, a)
	}
	spent := "agent answers spent: 2 of 2 for conversation conv-1; this ask waits for a human"
	if a, isErr := advise(cr, asks[2].ID, "approve"); isErr || a.Accepted || a.Reason != spent || a.Ask == nil || a.Ask.State != "pending" {
		t.Fatalf("one past the bound: isError %v %+v, want the reason %q", isErr, a, spent)
	}
	if a, isErr := advise(cr, asks[0].ID, "deny"); isErr || a.Accepted || a.Reason != "ask "+asks[0].ID+" was already answered" {
		t.Fatalf("an answered ask: isError %v %+v", isErr, a)
	}
	if left := asksOf(t, ctx, cr); len(left) != 2 || left[0].ID != asks[2].ID || left[1].ID != asks[3].ID {
		t.Fatalf("rev lists %+v, want the two still pending", left)
	}

	// alpha advises beta's asks, never its own.
	cadv := s.advisorClientAs(ctx, alpha, gid)
	mine := asksOf(t, ctx, cadv)
	if len(mine) != 1 || mine[0].Agent != "beta" {
		t.Fatalf("alpha lists %+v, want beta's one ask", mine)
	}
	if a, isErr := advise(cadv, asks[3].ID, "approve"); isErr || a.Accepted || a.Reason != "an advisor never answers an ask raised by its own identity" {
		t.Fatalf("alpha answering its own ask: isError %v %+v", isErr, a)
	}
	// rev is not beta's advisor.
	if a, isErr := advise(cr, mine[0].ID, "approve"); isErr || a.Accepted || a.Reason != "agent rev is not an advisor of agent beta's asks" {
		t.Fatalf("rev answering beta's ask: isError %v %+v", isErr, a)
	}

	// The count is the host's durable records': a restart refills nothing.
	s.restartHost()
	if a, isErr := advise(cr, asks[3].ID, "deny"); isErr || a.Accepted || a.Reason != spent {
		t.Fatalf("after a restart: isError %v %+v, want the reason %q", isErr, a, spent)
	}
}
