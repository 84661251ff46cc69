package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// approvalStack is a real host and controller with the agents alpha and
// beta (real accounts: twoAgentStack), alpha's calls to every appliance
// operation marked for approval with a park window of park, and an admin
// connection to the running host to answer its asks.
//
// alphaAgain connects alpha again, to a controller started again.
func approvalStack(t *testing.T, ctx context.Context, park time.Duration) (s *stack, ca *mcp.ClientSession, ad *asksAdmin, alphaAgain func() *mcp.ClientSession) {
	t.Helper()
	s, alpha, _, _, gid := twoAgentStack(t)
	ad = &asksAdmin{t: t, s: s}
	ad.do(ctx, admin.Request{Op: admin.OpAgentSet, Agent: &views.AgentSpec{Controller: s.cfg.Name, Agent: "alpha",
		Approval: &msg.ApprovalPolicy{Operations: []string{"appliance/*"}, ParkMs: park.Milliseconds(), ExpiryMs: time.Hour.Milliseconds()}}})
	alphaAgain = func() *mcp.ClientSession {
		s.openMCPTo(gid)
		return s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	}
	return s, s.agentClient(ctx, alpha.UID, alpha.GID, gid), ad, alphaAgain
}

// asksAdmin answers asks on the running host's admin socket, as
// `steward-operator approvals` does, and follows their events.
type asksAdmin struct {
	t      *testing.T
	s      *stack
	cursor uint64
}

func (a *asksAdmin) do(ctx context.Context, req admin.Request) admin.Reply {
	a.t.Helper()
	ad, err := admin.Open(ctx, a.s.store)
	if err != nil {
		a.t.Fatal(err)
	}
	defer ad.Close()
	rep, err := ad.Do(req)
	if err != nil {
		a.t.Fatalf("%s: %v", req.Op, err)
	}
	return rep
}

// next blocks until the host records the next ask event (the host waits
// for it on its own signal: no polling) and returns it.
func (a *asksAdmin) next(ctx context.Context) views.AskEvent {
	a.t.Helper()
	for ctx.Err() == nil {
		rep := a.do(ctx, admin.Request{Op: admin.OpApprovalsEvents, Approvals: &admin.ApprovalsRequest{After: a.cursor, WaitMs: 5000}})
		if rep.Approvals != nil && len(rep.Approvals.Events) > 0 {
			ev := rep.Approvals.Events[0]
			a.cursor = ev.Seq
			return ev
		}
	}
	a.t.Fatal("no ask event before the test's deadline")
	return views.AskEvent{}
}

// raised waits for the next ask raised.
func (a *asksAdmin) raised(ctx context.Context) msg.AskView {
	a.t.Helper()
	for {
		if ev := a.next(ctx); ev.Event == "raised" {
			return ev.Ask
		}
	}
}

func (a *asksAdmin) respond(ctx context.Context, ask string, v msg.Verdict, note string) msg.AskView {
	a.t.Helper()
	rep := a.do(ctx, admin.Request{Op: admin.OpApprovalsRespond, Approvals: &admin.ApprovalsRequest{Ask: ask, Verdict: v, Note: note}})
	if rep.Approvals == nil || rep.Approvals.Ask == nil {
		a.t.Fatalf("respond %s: no ask in the reply", ask)
	}
	return *rep.Approvals.Ask
}

// asyncResult is a call's result as the agent read it.
type asyncResult struct {
	ToolResult
	isErr bool
}

// callAsync runs one oracle_call in its own goroutine; its result comes
// on the channel (checked as call checks it).
func callAsync(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) <-chan asyncResult {
	ch := make(chan asyncResult, 1)
	go func() {
		var r asyncResult
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: args})
		if err != nil {
			t.Errorf("oracle_call: %v", err)
			ch <- r
			return
		}
		checkToolResult(t, ToolCall, res)
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				json.Unmarshal([]byte(tc.Text), &r.ToolResult)
			}
		}
		r.isErr = res.IsError
		ch <- r
	}()
	return ch
}

// journalCount counts the controller journal's records of kind for
// attempt (every record of those kinds names its attempt).
func (s *stack) journalCount(kind, attempt string) int {
	s.t.Helper()
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	n := 0
	if err := j.Iterate(1, func(r journal.Record) error {
		if r.Kind != kind {
			return nil
		}
		var id string
		switch kind {
		case ledger.KindBegin:
			var b ledger.Begin
			if err := ledger.Decode(r, &b); err != nil {
				return err
			}
			id = b.Attempt
		case ledger.KindAwaiting:
			var b ledger.Awaiting
			if err := ledger.Decode(r, &b); err != nil {
				return err
			}
			id = b.Attempt
		case ledger.KindConsented:
			var b ledger.Consented
			if err := ledger.Decode(r, &b); err != nil {
				return err
			}
			id = b.Attempt
		}
		if id == attempt {
			n++
		}
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// uncertainNow is what an enrollment would refuse over: ledger.Uncertain
// of the controller journal, read-only while the controller runs.
func (s *stack) uncertainNow() []ledger.Attempt {
	s.t.Helper()
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	u, err := ledger.Uncertain(j)
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

// TestApprovalInsideTheWindow: a call to an operation marked for approval
// parks inside its MCP call; approved meanwhile (the host pushes the
// verdict), it goes on in the same call: delivered and charged once, its
// result naming the ask and who answered it, the ask showing the agent's
// justification; meanwhile a second call with its requestId is refused in
// flight.
func TestApprovalInsideTheWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, ad, _ := approvalStack(t, ctx, msg.MaxApprovalPark)
	before, answers := s.purse(), s.applianceAnswers()

	done := callAsync(t, ctx, ca, withArg(callArgs("ap-in", map[string]any{"text": "inside"}), "justification", "the user asked for it"))
	ask := ad.raised(ctx)
	if ask.Agent != "alpha" || ask.Justification != "the user asked for it" || ask.Application != "appliance" || ask.Operation != "text.sha256" {
		t.Fatalf("the ask raised: %+v", ask)
	}
	// While the first call holds the attempt, a second with the same
	// requestId is refused in flight (nothing begun or sent for it).
	if c, _ := call(t, ctx, ca, ToolCall, withArg(callArgs("ap-in", map[string]any{"text": "inside"}), "justification", "the user asked for it")); c.Refusal == nil ||
		c.Refusal.Code != msg.CodeUncertain || !strings.HasPrefix(c.Refusal.Reason, `requestId "ap-in" is in flight as attempt `+ask.Attempt) {
		t.Fatalf("a second call while the first is parked: %+v %+v", c, c.Refusal)
	}
	n := 0
	for _, b := range s.begins() {
		if b.RequestID == "ap-in" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d begins with requestId ap-in, want the first call's alone", n)
	}
	answered := ad.respond(ctx, ask.ID, msg.VerdictApprove, "")
	r := <-done
	if r.isErr || r.Outcome != msg.StateDefinite || r.Status != 200 || r.Charge == nil || *r.Charge != s.price ||
		r.Ask == nil || r.Ask.ID != ask.ID || r.AnsweredBy == "" || r.AnsweredBy != answered.AnsweredBy || !strings.HasPrefix(r.AnsweredBy, "uid:") {
		t.Fatalf("the approved call: %+v (ask %+v), want delivered and charged %d, naming ask %s answered by %s", r, r.Ask, s.price, ask.ID, answered.AnsweredBy)
	}
	if p := s.purse(); p.Charged != before.Charged+s.price {
		t.Fatalf("charged %d -> %d, want once %d", before.Charged, p.Charged, s.price)
	}
	if n := s.applianceAnswers(); n != answers+1 {
		t.Fatalf("the application ran %d times, want once", n-answers)
	}
	if n := s.journalCount(ledger.KindConsented, r.AttemptID); n != 1 {
		t.Fatalf("%d consented records, want 1", n)
	}
}

// TestApprovalPendingThenCollected: unanswered within the park window the
// call is pending (awaiting-approval, not an error, naming its ask and how
// to collect it), blocking no enrollment; the same requestId with other
// arguments is a conflict; approved with nobody waiting, a call again
// with the same requestId and arguments collects the same attempt: one
// begin, delivered and charged once.
func TestApprovalPendingThenCollected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, ad, _ := approvalStack(t, ctx, time.Second)
	before, answers := s.purse(), s.applianceAnswers()

	args := callArgs("ap-later", map[string]any{"text": "later"})
	r, res := call(t, ctx, ca, ToolCall, args)
	if res.IsError || r.Outcome != msg.StateAwaitingApproval || r.Ask == nil || r.Ask.OnTimeout != "deny" || r.Ask.ExpiresAt == "" ||
		!strings.Contains(r.Detail, "call oracle_call again with the same requestId and arguments to collect the verdict") {
		t.Fatalf("unanswered: %+v (ask %+v)", r, r.Ask)
	}
	ask := ad.raised(ctx)
	if ask.ID != r.Ask.ID || ask.Attempt != r.AttemptID {
		t.Fatalf("the pending result names ask %s of attempt %s, the host raised %+v", r.Ask.ID, r.AttemptID, ask)
	}
	if u := s.uncertainNow(); len(u) != 0 {
		t.Fatalf("an attempt awaiting approval blocks enrollment: %+v", u)
	}
	if c, _ := call(t, ctx, ca, ToolCall, callArgs("ap-later", map[string]any{"text": "other"})); c.Refusal == nil || c.Refusal.Code != msg.CodeConflict ||
		c.Refusal.Reason != `requestId "ap-later" awaits approval (ask `+ask.ID+`) with different arguments as attempt `+r.AttemptID {
		t.Fatalf("other arguments: %+v %+v", c, c.Refusal)
	}

	ad.respond(ctx, ask.ID, msg.VerdictApprove, "go")
	again, res := call(t, ctx, ca, ToolCall, args)
	if res.IsError || again.Outcome != msg.StateDefinite || again.AttemptID != r.AttemptID || again.Charge == nil || *again.Charge != s.price ||
		again.Ask == nil || again.Ask.ID != ask.ID {
		t.Fatalf("called again after the approval: %+v, want attempt %s delivered", again, r.AttemptID)
	}
	if n := s.journalCount(ledger.KindBegin, r.AttemptID); n != 1 {
		t.Fatalf("%d begins of the attempt, want 1", n)
	}
	if p := s.purse(); p.Charged != before.Charged+s.price {
		t.Fatalf("charged %d -> %d, want once %d", before.Charged, p.Charged, s.price)
	}
	if n := s.applianceAnswers(); n != answers+1 {
		t.Fatalf("the application ran %d times, want once", n-answers)
	}
	// Its recorded answer now replays, not charged again.
	if rp, _ := call(t, ctx, ca, ToolCall, args); !rp.Replayed || rp.AttemptID != r.AttemptID {
		t.Fatalf("replay: %+v", rp)
	}
}

// TestApprovalDenied: denied inside the window, the call is refused in the
// same MCP call with code denied, its receipt and charge 0, naming the
// ask and who denied it; nothing was delivered or charged.
func TestApprovalDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, ad, _ := approvalStack(t, ctx, msg.MaxApprovalPark)
	before, answers := s.purse(), s.applianceAnswers()

	done := callAsync(t, ctx, ca, callArgs("ap-no", map[string]any{"text": "no"}))
	ask := ad.raised(ctx)
	ad.respond(ctx, ask.ID, msg.VerdictDeny, "not today")
	r := <-done
	if !r.isErr || r.Outcome != msg.StateRefused || r.Refusal == nil || r.Refusal.Code != msg.CodeDenied || r.ReceiptID == "" ||
		r.Charge == nil || *r.Charge != 0 || r.Ask == nil || r.Ask.ID != ask.ID || !strings.HasPrefix(r.AnsweredBy, "uid:") {
		t.Fatalf("denied: %+v (refusal %+v)", r, r.Refusal)
	}
	if p := s.purse(); p.Charged != before.Charged || p.Holds != 0 {
		t.Fatalf("a denied call charged or holds: %+v", p)
	}
	if n := s.applianceAnswers(); n != answers {
		t.Fatalf("a denied call reached the application")
	}
}

// TestApprovalAcrossAControllerRestart: a controller stopped while its
// call awaits approval starts again with the attempt awaiting approval
// (not uncertain: no enrollment blocked); approved, the call again with
// the same requestId is consented to by the new process, once, and
// delivered once.
func TestApprovalAcrossAControllerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, ad, alphaAgain := approvalStack(t, ctx, time.Second)
	answers := s.applianceAnswers()
	args := callArgs("ap-restart", map[string]any{"text": "restart"})
	r, _ := call(t, ctx, ca, ToolCall, args)
	if r.Outcome != msg.StateAwaitingApproval {
		t.Fatalf("before the restart: %+v", r)
	}
	ask := ad.raised(ctx)
	s.stopController()
	if u := s.uncertainNow(); len(u) != 0 {
		t.Fatalf("stopped, the attempt awaiting approval blocks enrollment: %+v", u)
	}
	s.startController()
	ad.respond(ctx, ask.ID, msg.VerdictApprove, "")
	ca = alphaAgain()
	again, res := call(t, ctx, ca, ToolCall, args)
	if res.IsError || again.Outcome != msg.StateDefinite || again.AttemptID != r.AttemptID || again.Charge == nil || *again.Charge != s.price {
		t.Fatalf("after the restart and the approval: %+v (refusal %+v)", again, again.Refusal)
	}
	if n := s.journalCount(ledger.KindConsented, r.AttemptID); n != 1 {
		t.Fatalf("%d consented records, want 1", n)
	}
	if n := s.journalCount(ledger.KindBegin, r.AttemptID); n != 1 {
		t.Fatalf("%d begins, want 1", n)
	}
	if n := s.applianceAnswers(); n != answers+1 {
		t.Fatalf("the application ran %d times, want once", n-answers)
	}
}

// TestApprovalAskDurableBeforeTheWait: the host killed (SIGKILL at
// host-after-ask) just after it journaled a call's ask, before its answer
// left, so the agent is told the attempt is uncertain; restarted, the host
// still holds the ask pending; the operator approves it with the shipped
// command; the agent's call again with the same requestId learns from the
// host that the attempt awaits approval (never a second begin or dispatch),
// collects it and is delivered and charged once.
func TestApprovalAskDurableBeforeTheWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, _, _ := approvalStack(t, ctx, time.Second)
	before, answers := s.purse(), s.applianceAnswers()
	h := s.startHostProc(operator.FailAfterAsk)
	args := callArgs("ap-k9", map[string]any{"text": "kill -9"})
	r, _ := call(t, ctx, ca, ToolCall, args)
	if r.Outcome != msg.StateUncertain {
		t.Fatalf("the host killed after the ask: %+v, want uncertain", r)
	}
	h.killed(t)
	s.startHostProc("")

	code, out := s.operatorCmd("approvals", "list", "--json")
	var asks []msg.AskView
	if err := json.Unmarshal([]byte(out), &asks); code != 0 || err != nil || len(asks) != 1 ||
		asks[0].Attempt != r.AttemptID || asks[0].State != msg.AskPending {
		t.Fatalf("approvals list after the restart: exit %d %v\n%s", code, err, out)
	}
	if code, out := s.operatorCmd("approvals", "respond", asks[0].ID, "--approve", "--note", "after the crash"); code != 0 {
		t.Fatalf("approvals respond: exit %d\n%s", code, out)
	}

	again, res := call(t, ctx, ca, ToolCall, args)
	if res.IsError || again.Outcome != msg.StateDefinite || again.AttemptID != r.AttemptID || again.Charge == nil || *again.Charge != s.price ||
		again.Ask == nil || again.Ask.ID != asks[0].ID || !strings.HasPrefix(again.AnsweredBy, "uid:") {
		t.Fatalf("called again after the restart and the approval: %+v (refusal %+v), want attempt %s delivered", again, again.Refusal, r.AttemptID)
	}
	if n := s.journalCount(ledger.KindBegin, r.AttemptID); n != 1 {
		t.Fatalf("%d begins, want 1", n)
	}
	if n := s.journalCount(ledger.KindAwaiting, r.AttemptID); n != 1 {
		t.Fatalf("%d awaiting records, want the one learned from the host", n)
	}
	if p := s.purse(); p.Charged != before.Charged+s.price {
		t.Fatalf("charged %d -> %d, want once %d", before.Charged, p.Charged, s.price)
	}
	if n := s.applianceAnswers(); n != answers+1 {
		t.Fatalf("the application ran %d times, want once", n-answers)
	}
}
