package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// allAsks is every ask the running host lists (approvals list --all).
func (a *asksAdmin) allAsks(ctx context.Context) []msg.AskView {
	a.t.Helper()
	rep := a.do(ctx, admin.Request{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{All: true}})
	if rep.Approvals == nil {
		return nil
	}
	return rep.Approvals.Asks
}

// askAgentUID is the agentUid of ask id's record in the host journal.
func (s *stack) askAgentUID(id string) string {
	s.t.Helper()
	j, _, err := hostlog.OpenReadOnly(s.store)
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	uid := ""
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != hostlog.KindAsk {
			return nil
		}
		rec, err := hostlog.Decode(r)
		if err != nil {
			return err
		}
		if b := rec.Body.(*hostlog.Ask); b.Ask == id {
			uid = b.AgentUID
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return uid
}

// agentUID is the account of the configured agent name, as "uid:N".
func (s *stack) agentUID(name string) string {
	for uid, n := range s.cfg.AgentNames() {
		if n == name {
			return "uid:" + strconv.FormatUint(uint64(uid), 10)
		}
	}
	s.t.Fatalf("no agent %s configured", name)
	return ""
}

// wantSameDenial checks that again is denial r told again: the same
// attempt, code and reason, the same receipt, charge 0, replayed.
func wantSameDenial(t *testing.T, what string, again, r ToolResult) {
	t.Helper()
	if again.Outcome != msg.StateRefused || again.Refusal == nil || r.Refusal == nil || again.Refusal.Code != msg.CodeDenied ||
		again.Refusal.Reason != r.Refusal.Reason || again.AttemptID != r.AttemptID || again.ReceiptID == "" ||
		again.ReceiptID != r.ReceiptID || again.Charge == nil || *again.Charge != 0 || !again.Replayed {
		t.Fatalf("%s: %+v (refusal %+v), want the denial of attempt %s again with receipt %s", what, again, again.Refusal, r.AttemptID, r.ReceiptID)
	}
}

// wantDeniedOnce fails t unless denied attempt id began once and was
// never consented to, and nothing was charged, held or delivered since
// the purse was before and the application had answered answers calls.
func wantDeniedOnce(t *testing.T, s *stack, id string, before views.PurseView, answers int) {
	t.Helper()
	if n := s.journalCount(ledger.KindBegin, id); n != 1 {
		t.Fatalf("%d begins of denied attempt %s, want 1", n, id)
	}
	if n := s.journalCount(ledger.KindConsented, id); n != 0 {
		t.Fatalf("%d consented records of denied attempt %s, want none", n, id)
	}
	if p := s.purse(); p.Charged != before.Charged || p.Holds != 0 {
		t.Fatalf("charged or held: %+v", p)
	}
	if n := s.applianceAnswers(); n != answers {
		t.Fatal("a denied requestId reached the application")
	}
}

// TestApprovalDenialSticks is the attacker's retry: a call denied by a
// human is called again with the same requestId, with the same and with
// other arguments. Each is told the same denial with the same receipt:
// no new attempt is begun, no new ask is raised, nothing is journaled,
// reserved, consented or charged, and the application never runs.
func TestApprovalDenialSticks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, ad, _ := approvalStack(t, ctx, msg.MaxApprovalPark)
	before, answers := s.purse(), s.applianceAnswers()
	args := callArgs("ap-stick", map[string]any{"text": "no"})
	done := callAsync(t, ctx, ca, args)
	ask := ad.raised(ctx)
	ad.respond(ctx, ask.ID, msg.VerdictDeny, "not this one")
	first := <-done
	if first.Refusal == nil || first.Refusal.Code != msg.CodeDenied || first.ReceiptID == "" {
		t.Fatalf("denied: %+v", first)
	}
	// The ask names the asking session's account, from SO_PEERCRED.
	if got, want := s.askAgentUID(ask.ID), s.agentUID("alpha"); got != want {
		t.Fatalf("the ask's agentUid %q, want %q (alpha's account)", got, want)
	}
	seq := s.lastSeq()
	for _, tc := range []struct {
		what string
		args map[string]any
	}{
		{"the same requestId and arguments", args},
		{"the same requestId with other arguments", callArgs("ap-stick", map[string]any{"text": "yes please"})},
		{"the same again", args},
	} {
		again, res := call(t, ctx, ca, ToolCall, tc.args)
		if !res.IsError {
			t.Fatalf("%s: not an error", tc.what)
		}
		wantSameDenial(t, tc.what, again, first.ToolResult)
	}
	if s.lastSeq() != seq {
		t.Fatalf("the calls again journaled %d records on the controller", s.lastSeq()-seq)
	}
	if asks := ad.allAsks(ctx); len(asks) != 1 || asks[0].ID != ask.ID {
		t.Fatalf("the host holds %d asks, want only the one denied: %+v", len(asks), asks)
	}
	wantDeniedOnce(t, s, first.AttemptID, before, answers)
}

// TestApprovalDenialAfterAControllerKill: the controller is killed
// (SIGKILL at controller-after-collect-answer) after the host ended the
// denied attempt with its receipt and before the controller journaled it.
// Started again, the call again with the same requestId collects and is
// told the denial with its receipt (not `refused: duplicate`), journals
// it once, and every later call is the same denial: one begin, one ask,
// nothing reserved, consented or charged.
func TestApprovalDenialAfterAControllerKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, _, ad, alphaAgain := approvalStack(t, ctx, msg.MaxApprovalPark)
	before, answers := s.purse(), s.applianceAnswers()
	s.stopController()
	child := s.startChild("STEWARD_FAILPOINT=" + FailAfterCollectAnswer)
	ca := alphaAgain()
	args := callArgs("ap-kill", map[string]any{"text": "no"})
	callErr := make(chan error, 1)
	go func() {
		_, err := ca.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: args})
		callErr <- err
	}()
	ask := ad.raised(ctx)
	ad.respond(ctx, ask.ID, msg.VerdictDeny, "no")
	select {
	case err := <-child.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("controller exit: %v, want SIGKILL at %s", err, FailAfterCollectAnswer)
		}
	case <-ctx.Done():
		t.Fatal("the controller did not reach the failpoint")
	}
	if err := <-callErr; err == nil {
		t.Fatal("the call answered although the controller died")
	}

	s.startController()
	ca = alphaAgain()
	r, res := call(t, ctx, ca, ToolCall, args)
	if !res.IsError || r.Outcome != msg.StateRefused || r.Refusal == nil || r.Refusal.Code != msg.CodeDenied ||
		r.Refusal.Reason != "the call's approval was denied (ask "+ask.ID+", by "+r.AnsweredBy+"): no; nothing was reserved, sent or charged" ||
		r.ReceiptID == "" || r.Charge == nil || *r.Charge != 0 || r.Ask == nil || r.Ask.ID != ask.ID {
		t.Fatalf("the call again after the kill: %+v (refusal %+v), want the denial with its receipt", r, r.Refusal)
	}
	seq := s.lastSeq()
	again, _ := call(t, ctx, ca, ToolCall, args)
	wantSameDenial(t, "a later call", again, r)
	if s.lastSeq() != seq {
		t.Fatal("the later call journaled something")
	}
	if asks := ad.allAsks(ctx); len(asks) != 1 {
		t.Fatalf("the host holds %d asks, want 1", len(asks))
	}
	wantDeniedOnce(t, s, r.AttemptID, before, answers)
}

// TestApprovalDenialAfterAHostKill: the host is killed (SIGKILL at
// host-after-refused) just after it journaled the denial of a collected
// ask, before its answer left, so the call is told it is uncertain.
// Restarted, the call again with the same requestId learns from the host
// (inspect) that a denial ended it, journals that denial with its receipt,
// and is told it; a call with other arguments is the same denial: one
// begin, one ask, nothing reserved, consented or charged.
func TestApprovalDenialAfterAHostKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, ca, _, _ := approvalStack(t, ctx, time.Second)
	before, answers := s.purse(), s.applianceAnswers()
	h := s.startHostProc(operator.FailAfterRefused)
	args := callArgs("ap-hk", map[string]any{"text": "no"})
	r, _ := call(t, ctx, ca, ToolCall, args)
	if r.Outcome != msg.StateAwaitingApproval || r.Ask == nil {
		t.Fatalf("first call: %+v", r)
	}
	if code, out := s.operatorCmd("approvals", "respond", r.Ask.ID, "--deny", "--note", "no"); code != 0 {
		t.Fatalf("approvals respond: exit %d\n%s", code, out)
	}
	if u, _ := call(t, ctx, ca, ToolCall, args); u.Outcome != msg.StateUncertain {
		t.Fatalf("the host killed after the denial: %+v, want uncertain", u)
	}
	h.killed(t)
	s.startHostProc("")

	denied, res := call(t, ctx, ca, ToolCall, args)
	if !res.IsError || denied.Outcome != msg.StateRefused || denied.Refusal == nil || denied.Refusal.Code != msg.CodeDenied ||
		denied.AttemptID != r.AttemptID || denied.ReceiptID == "" || denied.Charge == nil || *denied.Charge != 0 {
		t.Fatalf("the call again after the host's restart: %+v (refusal %+v), want the denial with its receipt", denied, denied.Refusal)
	}
	other, _ := call(t, ctx, ca, ToolCall, callArgs("ap-hk", map[string]any{"text": "other"}))
	if other.Refusal == nil || other.Refusal.Code != msg.CodeDenied || other.ReceiptID != denied.ReceiptID || other.AttemptID != r.AttemptID {
		t.Fatalf("other arguments after the denial: %+v (refusal %+v)", other, other.Refusal)
	}
	code, out := s.operatorCmd("approvals", "list", "--all", "--json")
	var asks []msg.AskView
	if err := json.Unmarshal([]byte(out), &asks); code != 0 || err != nil || len(asks) != 1 {
		t.Fatalf("approvals list --all: exit %d %v\n%s", code, err, out)
	}
	wantDeniedOnce(t, s, r.AttemptID, before, answers)
}
