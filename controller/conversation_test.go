package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// TestScopedConversationID: the application's conversationId is a fixed
// function of the agent and its conversationId, within the protocol's
// bound, apart from the scoped requestId of the same words, and unlike
// for two agents or two ids (no concatenation collides).
func TestScopedConversationID(t *testing.T) {
	a := oracleops.ScopedConversationID("alpha", "c1")
	if a != oracleops.ScopedConversationID("alpha", "c1") || len(a) != 44 || oracleops.ValidateConversationID(a) != nil {
		t.Fatalf("scoped %q", a)
	}
	for _, other := range []string{oracleops.ScopedConversationID("beta", "c1"), oracleops.ScopedConversationID("alpha", "c2"),
		oracleops.ScopedConversationID("alph", "ac1"), ScopedRequestID("alpha", "c1")} {
		if other == a {
			t.Fatalf("%q is alpha's c1 too", other)
		}
	}
	long := oracleops.ScopedConversationID(strings.Repeat("a", 32), strings.Repeat("C", oracleops.MaxIDLen))
	if oracleops.ValidateConversationID(long) != nil {
		t.Fatalf("the longest scoped id %q is refused", long)
	}
}

// recordApplication serves sock with a relay to a real appliance (state
// in state) that keeps the body of every request the application reads.
func recordApplication(t *testing.T, sock, state string) func() [][]byte {
	t.Helper()
	real := sock + "-app"
	startAppliance(t, real, state)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var bodies [][]byte
	go func() {
		for {
			host, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer host.Close()
				req, err := http.ReadRequest(bufio.NewReader(host))
				if err != nil {
					return
				}
				body, _ := io.ReadAll(req.Body)
				mu.Lock()
				bodies = append(bodies, body)
				mu.Unlock()
				req.Body = io.NopCloser(bytes.NewReader(body))
				app, err := net.Dial("unix", real)
				if err != nil {
					return
				}
				defer app.Close()
				req.Write(app)
				io.Copy(host, app) // the appliance closes after answering
			}()
		}
	}()
	return func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return bodies
	}
}

// TestConversationScopedPerAgent: two real accounts, the agents alpha and
// beta, name the same conversationId; the real application sees two
// conversations, each the agent's scoped id, and alpha's same id twice is
// one conversation there. The begins keep the agent's own id and the
// scoped one; the host's receipts (which the controller checks against
// the begin) and its per-agent conversation counts read the scoped one.
func TestConversationScopedPerAgent(t *testing.T) {
	group, gid := agentGroup(t)
	alpha := testaccount.New(t, "alpha", group)
	beta := testaccount.New(t, "beta", group)
	s := newStack(t, stackOpts{noApp: true, edit: func(m map[string]any) {
		m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": []any{
			map[string]string{"name": "alpha", "account": alpha.Name},
			map[string]string{"name": "beta", "account": beta.Name},
		}}
	}})
	bodies := recordApplication(t, s.appSock, filepath.Join(s.dir, "app-state"))
	s.startController()
	s.openMCPTo(gid)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ca := s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	cb := s.agentClient(ctx, beta.UID, beta.GID, gid)
	// The operator's default record: the host counts each agent's own
	// conversations under it.
	ad := &asksAdmin{t: t, s: s}
	ad.do(ctx, admin.Request{Op: admin.OpAgentSet, Agent: &views.AgentSpec{Controller: s.cfg.Name, Agent: msg.DefaultAgent}})
	a1, _ := call(t, ctx, ca, ToolCall, callArgs("r1", map[string]any{"text": "one"}))
	b1, _ := call(t, ctx, cb, ToolCall, callArgs("r1", map[string]any{"text": "one"}))
	a2, _ := call(t, ctx, ca, ToolCall, callArgs("r2", map[string]any{"text": "two"}))
	for _, r := range []ToolResult{a1, b1, a2} {
		if r.Outcome != msg.StateDefinite || r.Status != 200 {
			t.Fatalf("call: %+v", r)
		}
	}
	alphaConv, betaConv := oracleops.ScopedConversationID("alpha", "conv-1"), oracleops.ScopedConversationID("beta", "conv-1")
	var seen []string
	for _, b := range bodies() {
		var ib oracleops.InvokeBody
		if err := json.Unmarshal(b, &ib); err != nil {
			t.Fatalf("the application read %s: %v", b, err)
		}
		seen = append(seen, ib.ConversationID)
	}
	if want := []string{alphaConv, betaConv, alphaConv}; strings.Join(seen, " ") != strings.Join(want, " ") || alphaConv == betaConv {
		t.Fatalf("the application saw conversations %q, want %q", seen, want)
	}
	agentOf := map[string]string{a1.AttemptID: "alpha", b1.AttemptID: "beta", a2.AttemptID: "alpha"}
	for _, b := range s.begins() {
		if agent, ok := agentOf[b.Attempt]; ok && (b.ConversationID != "conv-1" || b.ScopedConversationID != oracleops.ScopedConversationID(agent, "conv-1")) {
			t.Errorf("begin of %s: conversation %q scoped %q", b.Attempt, b.ConversationID, b.ScopedConversationID)
		}
	}
	st, err := operator.OpenReadOnly(s.store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for agent, calls := range map[string]uint64{"alpha": 2, "beta": 1} {
		v, err := st.AgentShow(s.cfg.Name, agent)
		if err != nil || v.Record != msg.DefaultAgent || v.CallsToday != calls || v.ConversationsToday != 1 {
			t.Fatalf("%s at the host: %+v %v, want %d calls in one conversation", agent, v, err, calls)
		}
	}
}

// TestSameUnscopedConversation: an attempt begun after the requestId was
// scoped but before the conversationId was (its body carrying the scoped
// requestId and the agent's conversationId itself) is the same request as
// a new call of its agent with the same arguments, and not with others;
// the new call's own body carries the scoped conversationId.
func TestSameUnscopedConversation(t *testing.T) {
	c := fuzzController(t)
	raw, _ := json.Marshal(callArgs("r1", map[string]any{"text": "hello"}))
	p, err := c.plan(context.Background(), ToolCall, raw, "uid:1000")
	if err != nil {
		t.Fatal(err)
	}
	if p.scopedConv != oracleops.ScopedConversationID("uid:1000", "conv-1") || !strings.Contains(string(p.req.Body), `"conversationId":"`+p.scopedConv+`"`) {
		t.Fatalf("plan: %s (scoped %s)", p.req.Body, p.scopedConv)
	}
	old, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(`{"text":"hello"}`),
		ConversationID: "conv-1", OperationID: "text.sha256", RequestID: ScopedRequestID("uid:1000", "r1")})
	if err != nil {
		t.Fatal(err)
	}
	if old.SHA256() == p.sha || !c.sameUnscopedConversation(p, old.SHA256(), false) {
		t.Fatalf("the same call before conversations were scoped (%s) is not the same request", old.Body)
	}
	other, _ := json.Marshal(callArgs("r1", map[string]any{"text": "other"}))
	q, _ := c.plan(context.Background(), ToolCall, other, "uid:1000")
	if c.sameUnscopedConversation(q, old.SHA256(), false) {
		t.Fatal("other arguments are the same request as the call before conversations were scoped")
	}
	bad, _ := json.Marshal(map[string]any{"application": "appliance", "requestId": "r2", "conversationId": "",
		"operationId": "text.sha256", "arguments": map[string]any{"text": "x"}})
	if _, err := c.plan(context.Background(), ToolCall, bad, "uid:1000"); err == nil || !strings.Contains(err.Error(), "conversationId") {
		t.Fatalf("an empty conversationId: %v", err)
	}
}
