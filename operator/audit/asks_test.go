package audit_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// TestVerifyApprovals: receipts verify finds every reservation of an
// operation the agent's limits in force marked for approval that has no
// approved ask before it (none, one undecided, one denied), and none for
// an approved one or for a call made before the operation was marked.
func TestVerifyApprovals(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 10})
	w.Serve(t)
	// A call of alice's before any policy: the host reserves and answers it.
	d := peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)
	d.Agent = "alice"
	alice := "alice"
	w.Peer.Principal.Store(&alice) // the payer consents for alice
	if res := peertest.Call(t, w.Dial(t), d); res.Outcome != msg.StateDefinite {
		t.Fatal(res)
	}
	w.Stop()
	s, err := operator.Open(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.VerifyReceipts(1); err != nil || len(v.Findings) != 0 {
		t.Fatalf("before the policy: %+v %v", v.Findings, err)
	}
	// From here on alice's calls to calc.* wait for an approval.
	if _, err := s.SetAgentLimits(operator.AgentSpec{Controller: "ctl", Agent: "alice", Approval: humansOnly()}); err != nil {
		t.Fatal(err)
	}
	asks := &askStore{t: t, s: s, clk: peertest.NewClock(time.Now())}
	s.mu.Lock()
	ledger := s.st.ledger
	s.mu.Unlock()
	reserve := func(attempt string) {
		t.Helper()
		d := peertest.InvokeDispatch(t, attempt, "calc.evaluate", `{"expression":"1+1"}`)
		ledger++
		rec := recReserveV2{recReserve: recReserve{Attempt: attempt, Controller: "ctl", Grant: w.Grant, Application: "app",
			Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), Day: utcDay(time.Now()), Ledger: ledger},
			Method: d.Method, Path: d.Path, Body: d.Body, Agent: "alice", Conversation: "c1"}
		if _, err := s.append(hostlog.KindReserveV2, rec); err != nil {
			t.Fatal(err)
		}
	}
	me := fmt.Sprintf("uid:%d", os.Geteuid())
	reserve("a4") // no ask
	approved := asks.raise("a5", "alice", "c1").id
	if _, err := s.AnswerAsk(approved, human(msg.VerdictApprove, os.Geteuid(), "root")); err != nil {
		t.Fatal(err)
	}
	reserve("a5")
	denied := asks.raise("a6", "alice", "c1").id
	if _, err := s.AnswerAsk(denied, human(msg.VerdictDeny, os.Geteuid(), "root")); err != nil {
		t.Fatal(err)
	}
	reserve("a6")
	pending := asks.raise("a7", "alice", "c1").id
	reserve("a7")

	rep, err := s.VerifyReceipts(1)
	var marked []string
	for _, f := range rep.Findings {
		if strings.Contains(f, "marked for approval") {
			marked = append(marked, f)
		}
	}
	finding := func(attempt string) string { return "reservation of attempt " + attempt + " (journal record " }
	want := []string{
		"it has no ask",
		"its ask " + denied + " was denied by " + me,
		"its ask " + pending + " was not decided",
	}
	if err == nil || len(marked) != 3 {
		t.Fatalf("findings %q, err %v; want three of marked operations", rep.Findings, err)
	}
	for i, attempt := range []string{"a4", "a6", "a7"} {
		if !strings.HasPrefix(marked[i], finding(attempt)) ||
			!strings.HasSuffix(marked[i], "): app/calc.evaluate is marked for approval by agent alice's limits (revision 1), and "+want[i]) {
			t.Errorf("finding %d: %q; want attempt %s and %q", i, marked[i], attempt, want[i])
		}
	}
}

// TestVerifyReceiptNamesAsk: a receipt of an attempt with an ask must
// name the ask and who decided it; one of an attempt without one names
// none. Each other case is a finding naming both sides.
func TestVerifyReceiptNamesAsk(t *testing.T) {
	a := newJournalAudit(nil)
	a.asks.byAttempt["a5"] = &auditAsk{id: "ask-0123456789ab", attempt: "a5", decided: true, verdict: msg.VerdictApprove, answeredBy: "uid:1001"}
	for _, c := range []struct {
		rc   msg.Receipt
		want string
	}{
		{msg.Receipt{Seq: 1, Attempt: "a1"}, ""},
		{msg.Receipt{Seq: 2, Attempt: "a5", Ask: "ask-0123456789ab", AnsweredBy: "uid:1001"}, ""},
		{msg.Receipt{Seq: 3, Attempt: "a5"}, `receipt 3 (journal record 9): names ask "" answered by ""; attempt a5's ask is ask-0123456789ab, answered by "uid:1001"`},
		{msg.Receipt{Seq: 4, Attempt: "a5", Ask: "ask-0123456789ab", AnsweredBy: "agent:rev"},
			`receipt 4 (journal record 9): names ask "ask-0123456789ab" answered by "agent:rev"; attempt a5's ask is ask-0123456789ab, answered by "uid:1001"`},
		{msg.Receipt{Seq: 5, Attempt: "a1", Ask: "ask-0123456789ab", AnsweredBy: "uid:1001"},
			`receipt 5 (journal record 9): names ask "ask-0123456789ab" answered by "uid:1001", but attempt a1 has no ask`},
	} {
		a.findings = nil
		a.checkReceiptAsk(c.rc, "journal record 9")
		if got := strings.Join(a.findings, "|"); got != c.want {
			t.Errorf("receipt %d: %q; want %q", c.rc.Seq, got, c.want)
		}
	}
}

// TestVerifyAskRecordFaults: ask records that do not hang together are
// faults naming the record: an ask raised twice, a second ask of one
// attempt, a decision of an ask never raised, a second decision.
func TestVerifyAskRecordFaults(t *testing.T) {
	a := newJournalAudit(nil)
	r := journal.Record{Seq: 7}
	if err := a.ask(r, &recAsk{Ask: "ask-1", Attempt: "a1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.askAnswer(r, &recAskAnswer{Ask: "ask-1", Verdict: msg.VerdictApprove, By: "uid:1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{a.ask(r, &recAsk{Ask: "ask-1", Attempt: "a2"}), "receipt fault: journal record 7: ask ask-1 raised twice"},
		{a.ask(r, &recAsk{Ask: "ask-2", Attempt: "a1"}), "receipt fault: journal record 7: attempt a1 has a second ask ask-2"},
		{a.askExpired(r, &recAskExpired{Ask: "ask-3", Verdict: msg.VerdictDeny}), "receipt fault: journal record 7: decides ask ask-3, which was never raised"},
		{a.askExpired(r, &recAskExpired{Ask: "ask-1", Verdict: msg.VerdictDeny}), "receipt fault: journal record 7: decides ask ask-1 a second time"},
		{a.agentLimits(r, &recAgentLimits{}), "receipt fault: journal record 7: agent limits: no operator key to verify them with"},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("%v; want %q", c.err, c.want)
		}
	}
}
