package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// askStore is an open store with controller ctl, the agents' limits each
// carrying policy pol (its own copy), and an injected clock.
type askStore struct {
	t   *testing.T
	dir string
	s   *Store
	clk *peertest.Clock
	log *peertest.SyncBuffer
	uid string // the asking session's account raise records ("": none said)
}

func newAskStore(t *testing.T, policies map[string]*msg.ApprovalPolicy) *askStore {
	t.Helper()
	base := peertest.ShortDir(t)
	a := &askStore{t: t, dir: filepath.Join(base, "s"), clk: peertest.NewClock(time.Now()), log: &peertest.SyncBuffer{}}
	if _, err := Init(a.dir); err != nil {
		t.Fatal(err)
	}
	a.open()
	p := peertest.NewPeer(t, "ctl")
	if _, err := a.s.AddController("ctl", uint32(os.Geteuid()), p.KeysFile(), filepath.Join(base, "control.sock")); err != nil {
		t.Fatal(err)
	}
	for agent, pol := range policies {
		if _, err := a.s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: agent, Approval: pol}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { a.s.Close() })
	return a
}

func (a *askStore) open() {
	s, err := Open(a.dir)
	if err != nil {
		a.t.Fatal(err)
	}
	s.now = a.clk.Now
	s.log = slog.New(slog.NewTextHandler(a.log, nil))
	a.s = s
}

// reopen closes the store and opens it again: everything is replayed.
func (a *askStore) reopen() {
	if err := a.s.Close(); err != nil {
		a.t.Fatal(err)
	}
	a.open()
}

// raise raises an ask of agent's call in conversation conv (attempt id),
// under its current policy.
func (a *askStore) raise(attempt, agent, conv string) *ask {
	a.t.Helper()
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(`{"expression":"1+1"}`),
		ConversationID: conv, OperationID: "calc.evaluate", RequestID: "r-" + attempt})
	if err != nil {
		a.t.Fatal(err)
	}
	a.s.mu.Lock()
	pol := a.s.st.Agents[agentKey{"ctl", agent}].Limits.Approval
	a.s.mu.Unlock()
	now := a.clk.Now().UnixMilli()
	sum := req.SHA256()
	k := &ask{
		Attempt: attempt, Controller: "ctl", Route: "r1", Agent: agent, Conversation: conv, Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA: sum[:], Method: req.Method, Path: req.Path,
		Body: req.Body, Arguments: []byte(`{"expression":"1+1"}`), Price: 4, RaisedAt: now,
		ExpiresAt: now + pol.Expiry().Milliseconds(), Park: pol.Park(), OnTimeout: pol.TimeoutVerdict(), LimitsRevision: 1,
		AgentUID: a.uid,
	}
	if err := a.s.raise(k); err != nil {
		a.t.Fatal(err)
	}
	return k
}

func (a *askStore) kinds() map[string]int {
	a.t.Helper()
	n := map[string]int{}
	if err := a.s.j.Iterate(1, func(r journal.Record) error { n[r.Kind]++; return nil }); err != nil {
		a.t.Fatal(err)
	}
	return n
}

func human(v msg.Verdict, uid int, account string) views.Answer {
	return views.Answer{Verdict: v, By: fmt.Sprintf("uid:%d", uid), Account: account}
}

func advise(id, advisor string, v msg.Verdict) msg.Advise {
	return msg.Advise{Advisor: advisor, Ask: id, Verdict: v, Sentence: "looks fine to me"}
}

func wantAskRefusal(t *testing.T, err error, reason string) {
	t.Helper()
	var ar *AskRefusal
	if !errors.As(err, &ar) || !errors.Is(err, views.ErrRefused) || ar.Reason != reason {
		t.Fatalf("want the refusal %q, got %v", reason, err)
	}
}

func wantAdviceRefused(t *testing.T, res msg.AdviseResult, reason string) {
	t.Helper()
	if res.Refused == nil || res.Refused.Code != msg.CodeApprovals || res.Refused.Reason != reason {
		t.Fatalf("want the advice refused %q, got %+v", reason, res.Refused)
	}
}

func wantAdviceTaken(t *testing.T, res msg.AdviseResult) {
	t.Helper()
	if res.Refused != nil {
		t.Fatalf("advice refused: %+v", res.Refused)
	}
}

func rfc3339(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

func humansOnly() *msg.ApprovalPolicy {
	return &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}}
}

func withAdvisors(bound *uint64, advisors ...string) *msg.ApprovalPolicy {
	return &msg.ApprovalPolicy{Operations: []string{"app/calc.*"}, Advisors: advisors, AgentAnswers: bound}
}

// TestAskFirstAnswerWins: a second answer is refused naming who answered
// and when (an advisor is told only that it was answered); one record.
func TestAskFirstAnswerWins(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(nil, "rev")})
	k := a.raise("a1", "alice", "c1")
	v, err := a.s.AnswerAsk(k.ID, human(msg.VerdictApprove, 1001, "alice-h"))
	if err != nil || v.State != msg.AskApproved || v.AnsweredBy != "uid:1001" {
		t.Fatalf("first answer: %+v %v", v, err)
	}
	_, err = a.s.AnswerAsk(k.ID, human(msg.VerdictDeny, 1002, "bob"))
	wantAskRefusal(t, err, fmt.Sprintf("ask %s was already answered: approved by uid:1001 (alice-h) at %s", k.ID, rfc3339(v.AnsweredAt)))
	wantAdviceRefused(t, a.s.Advise("ctl", advise(k.ID, "rev", msg.VerdictDeny)), "ask "+k.ID+" was already answered")
	if n := a.kinds(); n[hostlog.KindAskAnswer] != 1 {
		t.Fatalf("journal %v", n)
	}
	if !strings.Contains(a.log.String(), `msg="steward-operator: ask answer refused" ask=`+k.ID) {
		t.Fatalf("no refused-answer line in the log:\n%s", a.log)
	}
	_, err = a.s.AnswerAsk("ask-000000000000", human(msg.VerdictDeny, 1002, ""))
	wantAskRefusal(t, err, "no ask ask-000000000000")
	_, err = a.s.AnswerAsk(k.ID, human(msg.VerdictWait, 1002, ""))
	if !errors.Is(err, views.ErrRefused) {
		t.Fatalf("a human's wait: %v", err)
	}
}

// TestOwnAccountAnswers: an ask raised by a session of account uid:N is
// refused to a human answering as uid:N, one line, nothing journaled,
// unless uid:N is the host's own account (the operator, and every account
// of steward-dev), whose answer is taken.
func TestOwnAccountAnswers(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly()})
	other := os.Getuid() + 1
	a.uid = fmt.Sprintf("uid:%d", other)
	k := a.raise("a1", "alice", "c1")
	_, err := a.s.AnswerAsk(k.ID, human(msg.VerdictApprove, other, "alice-h"))
	wantAskRefusal(t, err, fmt.Sprintf("uid:%d raised ask %s: an approver never answers an ask of its own account", other, k.ID))
	if n := a.kinds(); n[hostlog.KindAskAnswer] != 0 {
		t.Fatalf("journal %v", n)
	}
	a.uid = fmt.Sprintf("uid:%d", os.Getuid())
	k2 := a.raise("a2", "alice", "c1")
	if v, err := a.s.AnswerAsk(k2.ID, human(msg.VerdictApprove, os.Getuid(), "operator")); err != nil || v.State != msg.AskApproved {
		t.Fatalf("the host's own account on its own ask: %+v %v", v, err)
	}
}

// TestAskConcurrentAnswers: of answers given at once, exactly one wins.
func TestAskConcurrentAnswers(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(u64(100), "rev")})
	k := a.raise("a1", "alice", "c1")
	const n = 8
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := a.s.AnswerAsk(k.ID, human(msg.VerdictApprove, 1000+i, ""))
			errs <- err
		}()
		go func() {
			defer wg.Done()
			if r := a.s.Advise("ctl", advise(k.ID, "rev", msg.VerdictDeny)); r.Refused != nil {
				errs <- &AskRefusal{Reason: r.Refused.Reason}
			} else {
				errs <- nil
			}
		}()
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !strings.Contains(err.Error(), "was already answered"):
			t.Errorf("a losing answer: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d answers won", won)
	}
	if n := a.kinds(); n[hostlog.KindAskAnswer] != 1 {
		t.Fatalf("journal %v", n)
	}
}

// TestAdvisorBound: advisors decide at most N asks of one conversation;
// the N+1st is refused by the bound, exactly, and keeps waiting; another
// conversation has its own count; a reopened store refills nothing.
func TestAdvisorBound(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(u64(2), "rev", "rev2")})
	k1, k2, k3 := a.raise("a1", "alice", "c1"), a.raise("a2", "alice", "c1"), a.raise("a3", "alice", "c1")
	wantAdviceTaken(t, a.s.Advise("ctl", advise(k1.ID, "rev", msg.VerdictApprove)))
	wantAdviceTaken(t, a.s.Advise("ctl", advise(k2.ID, "rev2", msg.VerdictDeny)))
	spent := "agent answers spent: 2 of 2 for conversation c1; this ask waits for a human"
	before := a.kinds()
	r := a.s.Advise("ctl", advise(k3.ID, "rev", msg.VerdictApprove))
	wantAdviceRefused(t, r, spent)
	if r.Ask.State != msg.AskPending {
		t.Fatalf("the refused ask: %+v", r.Ask)
	}
	if after := a.kinds(); after[hostlog.KindAskAnswer] != before[hostlog.KindAskAnswer] {
		t.Fatalf("the answer past the bound was journaled: %v", after)
	}
	_, err := a.s.AnswerAsk(k3.ID, views.Answer{Verdict: msg.VerdictApprove, By: "agent:rev", Advisor: "rev"})
	if !errors.Is(err, views.ErrRefused) || err.Error() != "refused: an advisor answers through its controller's control channel (advise), not as a human" {
		t.Fatalf("an advisor's answer as a human's: %v", err)
	}
	k4 := a.raise("a4", "alice", "c2")
	k5 := a.raise("a5", "alice", "c3")
	a.reopen()
	wantAdviceRefused(t, a.s.Advise("ctl", advise(k3.ID, "rev2", msg.VerdictDeny)), spent)
	wantAdviceTaken(t, a.s.Advise("ctl", advise(k4.ID, "rev", msg.VerdictApprove)))
	wantAdviceTaken(t, a.s.Advise("ctl", advise(k5.ID, "rev", msg.VerdictApprove)))
	if v, _ := a.s.AskShow(k4.ID); v.State != msg.AskApproved || v.AnsweredBy != "agent:rev" || v.Note != "looks fine to me" {
		t.Fatalf("k4 %+v", v)
	}
	if v, err := a.s.AnswerAsk(k3.ID, human(msg.VerdictApprove, 1001, "")); err != nil || v.State != msg.AskApproved {
		t.Fatalf("a human answers past the bound: %+v %v", v, err)
	}
	wantAdviceTaken(t, a.s.Advise("ctl", advise(a.raise("a6", "alice", "c3").ID, "rev", msg.VerdictApprove)))
	wantAdviceRefused(t, a.s.Advise("ctl", advise(a.raise("a7", "alice", "c3").ID, "rev", msg.VerdictApprove)),
		"agent answers spent: 2 of 2 for conversation c3; this ask waits for a human")
}

// TestAdvisorBoundDefaultAndZero: no bound given is 3; 0 is none.
func TestAdvisorBoundDefaultAndZero(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(nil, "rev"), "bob": withAdvisors(u64(0), "rev")})
	for i := range 3 {
		wantAdviceTaken(t, a.s.Advise("ctl", advise(a.raise(fmt.Sprint("a", i), "alice", "c1").ID, "rev", msg.VerdictApprove)))
	}
	wantAdviceRefused(t, a.s.Advise("ctl", advise(a.raise("a3", "alice", "c1").ID, "rev", msg.VerdictApprove)),
		"agent answers spent: 3 of 3 for conversation c1; this ask waits for a human")
	wantAdviceRefused(t, a.s.Advise("ctl", advise(a.raise("b1", "bob", "c1").ID, "rev", msg.VerdictDeny)),
		"agent answers spent: 0 of 0 for conversation c1; this ask waits for a human")
}

// TestAdvisorNotAllowed: no advisors named, not one of them, its own ask,
// another controller's ask: each refused exactly, nothing journaled.
func TestAdvisorNotAllowed(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly(), "bob": withAdvisors(nil, "rev"), "rev": withAdvisors(nil, "bob")})
	ka, kb, kr := a.raise("a1", "alice", "c1"), a.raise("b1", "bob", "c1"), a.raise("r1", "rev", "c1")
	before := a.kinds()
	wantAdviceRefused(t, a.s.Advise("ctl", advise(ka.ID, "rev", msg.VerdictApprove)), "agent answers are not allowed for agent alice's asks")
	wantAdviceRefused(t, a.s.Advise("ctl", advise(kb.ID, "mallory", msg.VerdictApprove)), "agent mallory is not an advisor of agent bob's asks")
	wantAdviceRefused(t, a.s.Advise("ctl", advise(kr.ID, "rev", msg.VerdictApprove)), "an advisor never answers an ask raised by its own identity")
	wantAdviceRefused(t, a.s.Advise("ctl", advise(kr.ID, "rev", msg.VerdictWait)), "an advisor never answers an ask raised by its own identity")
	wantAdviceRefused(t, a.s.Advise("other", advise(kb.ID, "rev", msg.VerdictApprove)), "no ask "+kb.ID)
	if r := a.s.Advise("ctl", msg.Advise{Advisor: "rev", Ask: kb.ID, Verdict: msg.VerdictApprove, Sentence: "two\nlines"}); r.Refused == nil || r.Refused.Code != msg.CodeBadRequest {
		t.Fatalf("a two-line sentence: %+v", r.Refused)
	}
	long := strings.Repeat("x", msg.MaxAdviceSentence+1)
	if r := a.s.Advise("ctl", msg.Advise{Advisor: "rev", Ask: kb.ID, Verdict: msg.VerdictApprove, Sentence: long}); r.Refused == nil ||
		r.Refused.Reason != "the sentence of 281 bytes is over the bound of 280" {
		t.Fatalf("a sentence one past its bound: %+v", r.Refused)
	}
	if after := a.kinds(); after[hostlog.KindAskAnswer] != before[hostlog.KindAskAnswer] {
		t.Fatalf("refused answers journaled: %v", after)
	}
	if _, err := a.s.AdvisorAsks("ctl", "mallory"); err == nil {
		t.Fatal("mallory listed asks")
	} else {
		wantAskRefusal(t, err, "agent mallory is not an advisor of any agent's asks")
	}
	vs, err := a.s.AdvisorAsks("ctl", "rev")
	if err != nil || len(vs) != 1 || vs[0].ID != kb.ID || string(vs[0].Arguments) != `{"expression":"1+1"}` {
		t.Fatalf("rev's asks: %+v %v", vs, err)
	}
	if vs, err := a.s.AdvisorAsks("ctl", "bob"); err != nil || len(vs) != 1 || vs[0].ID != kr.ID {
		t.Fatalf("bob's asks: %+v %v", vs, err)
	}
}

// TestAdvisorWaitNotCounted: a wait is taken, journals nothing, changes
// nothing and does not count against the bound.
func TestAdvisorWaitNotCounted(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(u64(1), "rev")})
	k := a.raise("a1", "alice", "c1")
	before := a.kinds()
	for range 3 {
		r := a.s.Advise("ctl", advise(k.ID, "rev", msg.VerdictWait))
		wantAdviceTaken(t, r)
		if r.Ask.State != msg.AskPending {
			t.Fatalf("a wait changed the ask: %+v", r.Ask)
		}
	}
	if after := a.kinds(); len(after) != len(before) || after[hostlog.KindAskAnswer] != 0 {
		t.Fatalf("a wait was journaled: %v", after)
	}
	wantAdviceTaken(t, a.s.Advise("ctl", advise(k.ID, "rev", msg.VerdictApprove)))
	wantAdviceRefused(t, a.s.Advise("ctl", advise(a.raise("a2", "alice", "c1").ID, "rev", msg.VerdictApprove)),
		"agent answers spent: 1 of 1 for conversation c1; this ask waits for a human")
}

// TestAskExpiry: an unanswered ask read after its expiry is decided by its
// on-timeout verdict (deny by default, approve when the policy says), once,
// by any reading path; an answer after it is refused.
func TestAskExpiry(t *testing.T) {
	deny := &msg.ApprovalPolicy{Operations: []string{"app/*"}, ExpiryMs: 60_000}
	approve := &msg.ApprovalPolicy{Operations: []string{"app/*"}, ExpiryMs: 120_000, OnTimeout: msg.VerdictApprove}
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": deny, "bob": approve})
	kd, ka := a.raise("a1", "alice", "c1"), a.raise("b1", "bob", "c1")
	a.clk.Add(59_999 * time.Millisecond)
	if v, _ := a.s.AskShow(kd.ID); v.State != msg.AskPending {
		t.Fatalf("before its expiry: %+v", v)
	}
	a.clk.Add(time.Millisecond)
	v, err := a.s.AskShow(kd.ID)
	if err != nil || v.State != msg.AskExpired || v.AnsweredBy != "expiry" || v.AnsweredAt != kd.ExpiresAt {
		t.Fatalf("at its expiry: %+v %v", v, err)
	}
	_, err = a.s.AnswerAsk(kd.ID, human(msg.VerdictApprove, 1001, ""))
	wantAskRefusal(t, err, fmt.Sprintf("ask %s was already answered: it expired unanswered at %s to deny", kd.ID, rfc3339(kd.ExpiresAt)))
	if l, err := a.s.AskList(false); err != nil || len(l) != 1 || l[0].ID != ka.ID {
		t.Fatalf("pending %+v", l)
	}
	a.clk.Add(time.Minute)
	if l, err := a.s.AskList(false); err != nil || len(l) != 0 {
		t.Fatalf("pending after both expiries %+v", l)
	}
	all, err := a.s.AskList(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[1].State != msg.AskExpired || all[1].OnTimeout != msg.VerdictApprove {
		t.Fatalf("all %+v", all)
	}
	if n := a.kinds(); n[hostlog.KindAskExpired] != 2 {
		t.Fatalf("journal %v", n)
	}
	a.reopen()
	a.s.mu.Lock()
	gotD, gotA := a.s.st.Asks[kd.ID], a.s.st.Asks[ka.ID]
	a.s.mu.Unlock()
	if gotD.State != msg.AskExpired || gotD.Verdict != msg.VerdictDeny || gotA.Verdict != msg.VerdictApprove {
		t.Fatalf("after reopening: %+v %+v", gotD, gotA)
	}
	if !strings.Contains(a.log.String(), "steward-operator: ask expired") {
		t.Fatalf("no expiry line in the log:\n%s", a.log)
	}
}

// TestAskReplay: a reopened store has every ask, its state and answerer,
// its attempt awaiting approval with nothing held, the events in order and
// the advisors' counts.
func TestAskReplay(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(u64(1), "rev")})
	k1, k2 := a.raise("a1", "alice", "c1"), a.raise("a2", "alice", "c1")
	wantAdviceTaken(t, a.s.Advise("ctl", advise(k1.ID, "rev", msg.VerdictDeny)))
	evs, cur, err := a.s.AskEvents(context.Background(), 0, 0)
	if err != nil || len(evs) != 3 {
		t.Fatalf("events %+v %v", evs, err)
	}
	a.reopen()
	evs2, cur2, _ := a.s.AskEvents(context.Background(), 0, 0)
	if len(evs2) != 3 || cur2 != cur || evs2[2].Event != views.AskAnswered || evs2[2].Ask.State != msg.AskDenied || evs2[0].Ask.State != msg.AskPending {
		t.Fatalf("events after reopening %+v", evs2)
	}
	v1, _ := a.s.AskShow(k1.ID)
	v2, _ := a.s.AskShow(k2.ID)
	if v1.State != msg.AskDenied || v1.AnsweredBy != "agent:rev" || v2.State != msg.AskPending || v2.Justification != "" {
		t.Fatalf("after reopening: %+v %+v", v1, v2)
	}
	wantAdviceRefused(t, a.s.Advise("ctl", advise(k2.ID, "rev", msg.VerdictApprove)),
		"agent answers spent: 1 of 1 for conversation c1; this ask waits for a human")
	in, err := a.s.Inspect("ctl", "a2")
	if err != nil || in.State != msg.StateAwaitingApproval {
		t.Fatalf("inspect %+v %v", in, err)
	}
	if p, _ := a.s.PurseShow("ctl"); p.Holds != 0 || p.Balance != 0 {
		t.Fatalf("purse %+v", p)
	}
}

// TestAskEventsWait: a watcher waiting on the feed is woken by the next
// event (no polling); a wait with nothing new returns the same cursor.
func TestAskEventsWait(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly()})
	k := a.raise("a1", "alice", "c1")
	evs, cur, _ := a.s.AskEvents(context.Background(), 0, 0)
	if len(evs) != 1 || evs[0].Event != views.AskRaised || evs[0].Ask.ID != k.ID {
		t.Fatalf("%+v", evs)
	}
	if none, c, _ := a.s.AskEvents(context.Background(), cur, 0); len(none) != 0 || c != cur {
		t.Fatalf("nothing new: %+v %d", none, c)
	}
	got := make(chan []views.AskEvent)
	go func() {
		evs, _, _ := a.s.AskEvents(context.Background(), cur, time.Minute)
		got <- evs
	}()
	if _, err := a.s.AnswerAsk(k.ID, human(msg.VerdictApprove, 1001, "")); err != nil {
		t.Fatal(err)
	}
	evs = <-got
	if len(evs) != 1 || evs[0].Event != views.AskAnswered || evs[0].Ask.State != msg.AskApproved || evs[0].Seq <= cur {
		t.Fatalf("%+v", evs)
	}
	b, err := json.Marshal(evs[0])
	if err != nil || !strings.HasPrefix(string(b), `{"event":"answered","at":`) {
		t.Fatalf("watch line %s %v", b, err)
	}
}

// TestAskEventsEndWithTheirContext: a wait on the feed ends when its
// context does (the host shutting down, the watch's connection closing),
// not at the end of its wait, and answers nothing new.
func TestAskEventsEndWithTheirContext(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly()})
	a.raise("a1", "alice", "c1")
	_, cur, _ := a.s.AskEvents(context.Background(), 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		evs []views.AskEvent
		cur uint64
		err error
	}
	got := make(chan answer, 1)
	go func() {
		evs, c, err := a.s.AskEvents(ctx, cur, time.Hour)
		got <- answer{evs, c, err}
	}()
	cancel()
	select {
	case r := <-got:
		if len(r.evs) != 0 || r.cur != cur || r.err != nil {
			t.Fatalf("ended by its context: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end with its context")
	}
}

func u64(n uint64) *uint64 { return &n }
