package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestScopedRequestID: the application's requestId is a fixed function of
// the agent and its requestId (these values are P1.6's derivation,
// computed independently), 44 bytes of the id alphabet for the longest
// agent name and requestId, and different for another agent or id.
func TestScopedRequestID(t *testing.T) {
	for _, v := range []struct{ agent, id, want string }{
		{"alpha", "r1", "sxHD-4aAYv9afgtW2lOb0zYoTnyuBTC4ZgQlhzAHS51c"},
		{"beta", "r1", "sKYlNILBUXCjvrZiScnhfHXoAY6GCL_rWH95h0kZJd7E"},
		{"alpha", "r2", "sDzbkLJuBltDdHfTC09-QIJlTBCsuhSQIw-t-tiKihoQ"},
	} {
		if got := ScopedRequestID(v.agent, v.id); got != v.want {
			t.Errorf("%s %s: %s, want %s", v.agent, v.id, got, v.want)
		}
	}
	long := ScopedRequestID(strings.Repeat("a", 32), strings.Repeat("R", oracleops.MaxIDLen))
	if err := oracleops.ValidateRequestID(long); err != nil || len(long) != 44 {
		t.Fatalf("%q (%d bytes): %v", long, len(long), err)
	}
	// The separator keeps ("a", "b\x00c")-style splits apart: agent names
	// and requestIds have no NUL, so agent+id pairs never collide.
	if ScopedRequestID("ab", "c") == ScopedRequestID("a", "bc") {
		t.Fatal("two agent/id splits of the same bytes share a scoped id")
	}
}

// agentClient connects an MCP client through the real proxy binary run as
// account uid/gid with the supplementary group that may reach the socket.
func (s *stack) agentClient(ctx context.Context, uid, gid, group uint32) *mcp.ClientSession {
	s.t.Helper()
	cmd := exec.Command(controllerBin(s.t), "mcp", "--socket", s.cfg.Sockets.MCP)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{group}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "steward-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		s.t.Fatalf("mcp connect as uid %d: %v", uid, err)
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// openMCPTo lets the accounts of group reach the stack's MCP socket
// through the file system (the proxy binary, the directories, the
// socket's group), so that what admits or refuses them is SO_PEERCRED.
func (s *stack) openMCPTo(group uint32) {
	s.t.Helper()
	if err := os.Chmod(filepath.Dir(controllerBin(s.t)), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chmod(s.dir, 0o711); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chown(s.cfg.Sockets.MCP, 0, int(group)); err != nil {
		s.t.Fatal(err)
	}
}

// agentGroup makes a group for t's agent accounts, removed when t ends
// (after the accounts in it, which t.Cleanup removes first).
func agentGroup(t *testing.T) (string, uint32) {
	t.Helper()
	testenv.NeedRoot(t, "to create the agents' accounts and their group")
	stem, err := testaccount.NextStem()
	if err != nil {
		t.Fatal(err)
	}
	name := stem + "mcp"
	gid, err := testaccount.CreateGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testaccount.RemoveGroup(name); err != nil {
			t.Errorf("removing the test group: %v", err)
		}
	})
	return name, gid
}

// twoAgentStack is a running stack whose controller config names two real
// accounts, members of the agents' group (gid), as the agents alpha and
// beta, and whose MCP socket that group may open.
func twoAgentStack(t *testing.T) (s *stack, alpha, beta testaccount.Account, group string, gid uint32) {
	t.Helper()
	group, gid = agentGroup(t)
	alpha = testaccount.New(t, "alpha", group)
	beta = testaccount.New(t, "beta", group)
	s = newStack(t, stackOpts{edit: func(m map[string]any) {
		m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": []any{
			map[string]string{"name": "alpha", "account": alpha.Name},
			map[string]string{"name": "beta", "account": beta.Name},
		}}
	}})
	s.startController()
	s.openMCPTo(gid)
	return s, alpha, beta, group, gid
}

// TestTwoAgentAccounts: two real accounts, configured as the agents alpha
// and beta, call through mcp.sock. Each is identified by its uid alone in
// its begins (agent, the payer's principal, the scoped requestId in the
// body) and in the consents of its receipts. beta sending alpha's
// requestId with alpha's arguments gets a fresh attempt, charged, and with
// other arguments no conflict (the application saw two different ids);
// alpha's own replay and conflict still hold, and survive a restart. A
// third account in the socket's group but not configured is refused with
// a JSON-RPC error answering its first request.
func TestTwoAgentAccounts(t *testing.T) {
	s, alpha, beta, group, gid := twoAgentStack(t)
	stranger := testaccount.New(t, "none", group)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	got := proxyOnce(t, s.cfg.Sockets.MCP, &syscall.Credential{Uid: stranger.UID, Gid: stranger.GID, Groups: []uint32{gid}})
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"steward: peer uid %d is not on the agent allow-list"}}`+"\n", stranger.UID)
	if got != want {
		t.Fatalf("an account not configured:\n got %s\nwant %s", got, want)
	}

	ca := s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	cb := s.agentClient(ctx, beta.UID, beta.GID, gid)
	hello := map[string]any{"text": "hello"}
	before := s.purse()
	a1, res := call(t, ctx, ca, ToolCall, callArgs("r1", hello))
	if res.IsError || a1.Outcome != msg.StateDefinite || a1.Status != 200 {
		t.Fatalf("alpha r1: %+v", a1)
	}
	b1, res := call(t, ctx, cb, ToolCall, callArgs("r1", hello))
	if res.IsError || b1.Outcome != msg.StateDefinite || b1.Status != 200 || b1.Replayed || b1.AttemptID == a1.AttemptID || *b1.Charge != s.price {
		t.Fatalf("beta with alpha's requestId and arguments: %+v, want a fresh attempt (alpha's %s)", b1, a1.AttemptID)
	}
	a3, _ := call(t, ctx, ca, ToolCall, callArgs("r3", map[string]any{"text": "three"}))
	b3, res := call(t, ctx, cb, ToolCall, callArgs("r3", map[string]any{"text": "not three"}))
	if res.IsError || b3.Outcome != msg.StateDefinite || b3.Status != 200 || b3.AttemptID == a3.AttemptID {
		t.Fatalf("beta with alpha's requestId and other arguments: %+v, want no conflict at the controller or the application", b3)
	}
	if p := s.purse(); p.Balance != before.Balance-4*s.price {
		t.Fatalf("balance %d -> %d, want four charges of %d", before.Balance, p.Balance, s.price)
	}

	ownReplayAndConflict := func(when string) {
		seq := s.lastSeq()
		r, res := call(t, ctx, ca, ToolCall, callArgs("r1", hello))
		if res.IsError || !r.Replayed || r.AttemptID != a1.AttemptID {
			t.Fatalf("%s: alpha's replay: %+v", when, r)
		}
		r, _ = call(t, ctx, cb, ToolCall, callArgs("r1", hello))
		if !r.Replayed || r.AttemptID != b1.AttemptID {
			t.Fatalf("%s: beta's replay: %+v", when, r)
		}
		r, _ = call(t, ctx, ca, ToolCall, callArgs("r3", map[string]any{"text": "not three"}))
		if r.Refusal == nil || r.Refusal.Code != msg.CodeConflict || r.Refusal.Reason != fmt.Sprintf("requestId \"r3\" was used with different arguments by attempt %s", a3.AttemptID) {
			t.Fatalf("%s: alpha's conflict: %+v", when, r)
		}
		if s.lastSeq() != seq {
			t.Fatalf("%s: a replay or conflict journaled something", when)
		}
	}
	ownReplayAndConflict("running")

	// Each agent is named in its begins and in its receipts' consents.
	agentOf := map[string]string{a1.AttemptID: "alpha", a3.AttemptID: "alpha", b1.AttemptID: "beta", b3.AttemptID: "beta"}
	idOf := map[string]string{a1.AttemptID: "r1", a3.AttemptID: "r3", b1.AttemptID: "r1", b3.AttemptID: "r3"}
	for _, b := range s.begins() {
		agent, ok := agentOf[b.Attempt]
		if !ok {
			continue
		}
		scoped := ScopedRequestID(agent, idOf[b.Attempt])
		if b.Agent != agent || b.Principal != agent || b.RequestID != idOf[b.Attempt] || b.ScopedRequestID != scoped ||
			!strings.Contains(string(b.Body), `"requestId":"`+scoped+`"`) {
			t.Errorf("begin of %s: agent %q principal %q requestId %q scoped %q body %s", b.Attempt, b.Agent, b.Principal, b.RequestID, b.ScopedRequestID, b.Body)
		}
		delete(agentOf, b.Attempt)
	}
	if len(agentOf) != 0 {
		t.Fatalf("no begin for %v", agentOf)
	}
	s.checkConsentPrincipals(map[string]string{a1.AttemptID: "alpha", a3.AttemptID: "alpha", b1.AttemptID: "beta", b3.AttemptID: "beta"})

	// The real host answers the allowance: the operator set no limits for
	// alpha, and the overview says so and still lists the application.
	var ov Overview
	_, res = call(t, ctx, ca, ToolOverview, map[string]any{})
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &ov)
	if !ov.Limits.Reported || ov.Limits.Limited || ov.Limits.CallsLeft != nil || len(ov.Applications) != 1 ||
		!strings.Contains(ov.Limits.Note, "the operator set no limits for you") {
		t.Fatalf("overview: %+v", ov)
	}

	// After a restart the index, rebuilt from the journal, keeps the
	// agents apart (their sessions end; they reconnect).
	s.stopController()
	s.startController()
	s.openMCPTo(gid)
	ca = s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	cb = s.agentClient(ctx, beta.UID, beta.GID, gid)
	ownReplayAndConflict("after a restart")
}

// checkConsentPrincipals checks that the receipt of each attempt's result
// carries a consent of this controller naming its agent as the principal.
func (s *stack) checkConsentPrincipals(want map[string]string) {
	s.t.Helper()
	bind, err := LoadBundle(s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	keys, err := LoadKeys(s.cfg.KeyDir)
	if err != nil {
		s.t.Fatal(err)
	}
	own := wire.NewKeyring(keys.Dispatch.Public())
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	seen := 0
	err = j.Iterate(1, func(r journal.Record) error {
		var res ledger.Result
		if r.Kind != ledger.KindResult || ledger.Decode(r, &res) != nil || want[res.Attempt] == "" {
			return nil
		}
		rc, err := msg.VerifyReceipt(res.Receipt, bind.HostRing)
		if err != nil {
			return err
		}
		cs, err := msg.OpenConsent(rc.Consent, own)
		if err != nil {
			return err
		}
		if cs.Principal != want[res.Attempt] {
			s.t.Errorf("attempt %s: consent principal %q, want %q", res.Attempt, cs.Principal, want[res.Attempt])
		}
		seen++
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	if seen != len(want) {
		s.t.Fatalf("%d receipts with consents, want %d", seen, len(want))
	}
}

// TestAttemptsListByAgent: attempts list --agent shows only that agent's
// uncertain attempts (here begins journaled without results, as a crash
// leaves them; one from before agents belongs to the principal it
// recorded); a name that is no principal is refused (exit 2).
func TestAttemptsListByAgent(t *testing.T) {
	s := newStack(t, stackOpts{})
	raw, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(s.cfg, raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []ledger.Begin{
		{Attempt: "a1", Tool: ToolCall, Application: "appliance", RequestID: "r1", Agent: "alpha", Principal: "alpha"},
		{Attempt: "b1", Tool: ToolCall, Application: "appliance", RequestID: "r1", Agent: "beta", Principal: "beta"},
		{Attempt: "o1", Tool: ToolCall, Application: "appliance", RequestID: "r0", Principal: "uid:1000"},
	} {
		if _, err := j.Append(ledger.KindBegin, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for agent, want := range map[string]string{"alpha": "a1", "beta": "b1", "uid:1000": "o1", "gamma": ""} {
		code, out, errs := runCLI("attempts", "list", "--config", s.cfgPath, "--agent", agent, "--json")
		var list []Attempt
		if code != ExitOK || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("--agent %s: exit %d %s %s", agent, code, out, errs)
		}
		if want == "" && len(list) != 0 || want != "" && (len(list) != 1 || list[0].ID != want || list[0].Agent != agent) {
			t.Errorf("--agent %s: %+v, want %q", agent, list, want)
		}
	}
	code, out, _ := runCLI("attempts", "list", "--config", s.cfgPath)
	if code != ExitOK || strings.Count(out, "\n") != 3 || !strings.Contains(out, "a1\tuncertain\toracle_call\tappliance\tr1\talpha\t") {
		t.Fatalf("attempts list: exit %d\n%s", code, out)
	}
	code, out, errs := runCLI("attempts", "list", "--config", s.cfgPath, "--agent", "Alpha")
	if code != ExitRefused || out != "" || errs != "steward-controller: usage: --agent: \"Alpha\" is not a principal (\"foreground\", \"uid:N\" or an agent name)\n" {
		t.Fatalf("a bad --agent: exit %d %q %q", code, out, errs)
	}
}

// frameHost serves the stack's forward socket, in place of its host, as a
// host that completes the handshake with the operator's key and answers
// each request with answer: a host newer than the one in this tree (one
// that answers msg.TypeAllowance), for the controller's side of it.
func frameHost(t *testing.T, s *stack, answer func(*wire.Envelope) (string, any)) {
	t.Helper()
	s.stopHost()
	if err := <-s.hostDone; err != nil {
		t.Fatal(err)
	}
	s.stopHost = nil
	serveFrames(t, s, answer)
}

// serveFrames listens on the stack's forward and control sockets as a
// stand-in host: it completes each handshake with the operator's key and
// answers every request with answer, but a routes request on the control
// socket, which it answers with the stack's route as the host would. The
// stack's own host must not be serving.
func serveFrames(t *testing.T, s *stack, answer func(*wire.Envelope) (string, any)) {
	t.Helper()
	hostKey, err := wire.ReadHybridKey(filepath.Join(s.store, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	tool, err := wire.ReadSigningKey(filepath.Join(s.cfg.KeyDir, ctlconf.ToolKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := operator.OpenReadOnly(s.store)
	if err != nil {
		t.Fatal(err)
	}
	route, err := st.SignedRoute("r-appliance")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	routes := func(req *wire.Envelope) (string, any) {
		if req.T == msg.TypeRoutes {
			return msg.TypeRoutesResult, msg.RoutesResult{Active: [][]byte{msg.RouteID(route)}, Records: [][]byte{route}}
		}
		return answer(req)
	}
	serveSocket(t, filepath.Join(s.dir, "fwd.sock"), msg.PurposeDispatch, hostKey, tool, answer)
	serveSocket(t, filepath.Join(s.dir, "control.sock"), msg.PurposeControl, hostKey, tool, routes)
}

// serveSocket is one socket of serveFrames.
func serveSocket(t *testing.T, path, purpose string, hostKey *wire.HybridSigningKey, tool *wire.SigningKey, answer func(*wire.Envelope) (string, any)) {
	t.Helper()
	l, err := wire.Listen(wire.ListenConfig{Path: path, Mode: 0o600, Allow: func(wire.PeerCred) error { return nil },
		Refuse: wire.RefuseFrame(hostKey.Ed25519())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cfg := wire.ChannelConfig{Key: hostKey.Ed25519(), Role: msg.RoleHost, PeerRole: msg.RoleControllerTool,
		PeerKeys: wire.NewKeyring(tool.Public()), Path: path, Purpose: purpose,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame}
	go func() {
		for {
			pc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer pc.Close()
				ch, err := wire.ServerHandshake(pc, cfg)
				if err != nil {
					return
				}
				wire.Serve(context.Background(), ch, wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
					return answer(req)
				}))
			}()
		}
	}()
}

// TestDispatchAndAllowanceNameTheAgent: every dispatch names its agent (a
// peer the legacy uids admit is "uid:N", the foreground socket
// "foreground"); the overview asks the host for the calling agent's
// allowance and shows what it answers, leaving out an application no
// operation pattern names, and shows nothing of an answer about another
// agent.
func TestDispatchAndAllowanceNameTheAgent(t *testing.T) {
	s := newStack(t, stackOpts{})
	me := fmt.Sprintf("uid:%d", os.Getuid())
	dispatched := make(chan string, 4)
	asked := make(chan string, 4)
	answers := make(chan msg.AllowanceResult, 4)
	frameHost(t, s, func(req *wire.Envelope) (string, any) {
		switch req.T {
		case msg.TypeDispatch:
			var d msg.Dispatch
			req.Decode(&d)
			dispatched <- d.Agent
		case msg.TypeAllowance:
			var a msg.Allowance
			req.Decode(&a)
			asked <- a.Agent
			return msg.TypeAllowanceResult, <-answers
		}
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "not admitted here"}
	})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	call(t, ctx, cs, ToolCall, callArgs("r1", map[string]any{"text": "x"}))
	if got := <-dispatched; got != me {
		t.Fatalf("the MCP peer's dispatch names %q, want %q", got, me)
	}
	args, _ := json.Marshal(callArgs("r1", map[string]any{"text": "x"}))
	if _, err := foreground.Call(ctx, s.cfg.Sockets.Foreground, uint32(os.Geteuid()), foreground.Request{Op: foreground.OpSubmit, Tool: ToolCall, Arguments: args}); err != nil {
		t.Fatal(err)
	}
	if got := <-dispatched; got != "foreground" {
		t.Fatalf("the foreground's dispatch names %q", got)
	}

	three, seven := uint64(3), uint64(7)
	refills := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	overview := func(a msg.AllowanceResult) Overview {
		t.Helper()
		answers <- a
		_, res := call(t, ctx, cs, ToolOverview, map[string]any{})
		if got := <-asked; got != me {
			t.Fatalf("the allowance asked about %q, want %q", got, me)
		}
		var ov Overview
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &ov); err != nil {
			t.Fatal(err)
		}
		return ov
	}
	ov := overview(msg.AllowanceResult{Agent: me, Limited: true, Operations: []string{"appliance/text.*"}, CallsLeft: &three, CreditsLeft: &seven, RefillsAt: refills.UnixMilli()})
	if l := ov.Limits; !l.Reported || !l.Limited || *l.CallsLeft != 3 || *l.CreditsLeft != 7 || l.RefillsAt != "2026-12-02T00:00:00Z" ||
		len(l.Operations) != 1 || len(ov.Applications) != 1 {
		t.Fatalf("limited: %+v", ov)
	}
	ov = overview(msg.AllowanceResult{Agent: me, Limited: true, Operations: []string{"other/*"}, CallsLeft: &three})
	if len(ov.Applications) != 0 || !ov.Limits.Limited {
		t.Fatalf("an application no pattern names is listed: %+v", ov)
	}
	ov = overview(msg.AllowanceResult{Agent: me})
	if !ov.Limits.Reported || ov.Limits.Limited || ov.Limits.Note != limitsNoLimit || len(ov.Applications) != 1 {
		t.Fatalf("no limits record: %+v", ov)
	}
	ov = overview(msg.AllowanceResult{Agent: "uid:1", Limited: true, CallsLeft: &three})
	if ov.Limits.Reported || ov.Limits.CallsLeft != nil || ov.Limits.Note != "the host's answer about your limits could not be read" {
		t.Fatalf("an answer about another agent: %+v", ov)
	}
}

// TestSameUnscoped: an attempt begun before agents (its body carrying the
// agent's requestId itself) is the same request as a new call of its
// principal with the same arguments, and not with others; the new call's
// own body carries the scoped id, and planning it again gives the same
// bytes (what a replay and a redelivery rely on).
func TestSameUnscoped(t *testing.T) {
	c := fuzzController(t)
	raw, _ := json.Marshal(callArgs("r1", map[string]any{"text": "hello"}))
	p, err := c.plan(context.Background(), ToolCall, raw, "uid:1000")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.plan(context.Background(), ToolCall, raw, "uid:1000")
	if again.sha != p.sha || p.scopedID != ScopedRequestID("uid:1000", "r1") || !strings.Contains(string(p.req.Body), p.scopedID) {
		t.Fatalf("plan: %s (scoped %s)", p.req.Body, p.scopedID)
	}
	old, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(`{"text":"hello"}`),
		ConversationID: "conv-1", OperationID: "text.sha256", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.sameUnscopedConversation(p, old.SHA256(), true) {
		t.Fatalf("the same call before agents (%s) is not the same request", old.Body)
	}
	other, _ := json.Marshal(callArgs("r1", map[string]any{"text": "other"}))
	q, _ := c.plan(context.Background(), ToolCall, other, "uid:1000")
	if c.sameUnscopedConversation(q, old.SHA256(), true) {
		t.Fatal("other arguments are the same request as the call before agents")
	}
}

// BenchmarkScopedRequestID is what scoping adds to planning a call.
func BenchmarkScopedRequestID(b *testing.B) {
	for range b.N {
		ScopedRequestID("alpha", "request-0123456789")
	}
}
