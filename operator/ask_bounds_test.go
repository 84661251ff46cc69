package operator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// raiseSized raises an ask of agent's call in conversation conv (attempt
// id) whose arguments are a text of size bytes, counted on today's UTC
// day as a dispatch's raise counts it; the raise's error is returned.
func (a *askStore) raiseSized(attempt, agent, conv string, size int) (*ask, error) {
	a.t.Helper()
	args, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", size)})
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: args,
		ConversationID: conv, OperationID: "calc.evaluate", RequestID: "r-" + attempt})
	if err != nil {
		a.t.Fatal(err)
	}
	a.s.mu.Lock()
	pol := a.s.st.Agents[agentKey{"ctl", agent}].Limits.Approval
	a.s.mu.Unlock()
	now := a.clk.Now().UnixMilli()
	sum := req.SHA256()
	ib, _ := oracleops.ParseInvokeBody(req.Body)
	k := &ask{
		Attempt: attempt, Controller: "ctl", Route: "r1", Agent: agent, Conversation: conv, Application: "app",
		Operation: "calc.evaluate", Kind: msg.KindInvoke, RequestSHA: sum[:], Method: req.Method, Path: req.Path,
		Body: req.Body, Arguments: ib.Arguments, Price: 4, RaisedAt: now, ExpiresAt: now + pol.Expiry().Milliseconds(),
		Park: pol.Park(), OnTimeout: pol.TimeoutVerdict(), LimitsRevision: 1, CallDay: utcDay(a.clk.Now()),
	}
	return k, a.s.raise(k)
}

// wantSnapshotSame closes the store, checks that the state a read-only
// open replays survives its snapshot encoding whole (wantSameState), and
// opens the store again.
func (a *askStore) wantSnapshotSame() {
	a.t.Helper()
	if err := a.s.Close(); err != nil {
		a.t.Fatal(err)
	}
	ro, err := OpenReadOnly(a.dir)
	if err != nil {
		a.t.Fatal(err)
	}
	h := ro.st.hist // the index is no part of the state
	ro.st.hist = nil
	wantSameState(a.t, ro.st)
	ro.st.hist = h
	ro.Close()
	a.open()
}

// wantRaiseRefused fails unless err is a raise refused with exactly reason.
func wantRaiseRefused(t *testing.T, err error, reason string) {
	t.Helper()
	rr, ok := err.(*raiseRefused)
	if !ok || rr.ref.Code != msg.CodeAgentLimit || rr.ref.Reason != reason {
		t.Fatalf("want the raise refused %q, got %v", reason, err)
	}
}

const pendingTail = ": a call needing approval is refused until one is answered or expires; nothing was journaled, reserved or sent"

// TestAdvisorAnswersPerDay: the asking agent names its conversations, so
// advisors' answers are also bounded per asking agent and UTC day: with a
// bound of 2, the third answer is refused whatever conversation its ask
// names, nothing journaled; a restart refills nothing; the next UTC day
// does; a human still answers.
func TestAdvisorAnswersPerDay(t *testing.T) {
	pol := withAdvisors(nil, "rev")
	pol.AgentAnswersPerDay, pol.ExpiryMs = u64(2), (72 * time.Hour).Milliseconds()
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": pol, "bob": withAdvisors(nil, "rev")})
	ks := make([]*ask, 5)
	for i := range ks {
		ks[i] = a.raise(fmt.Sprint("a", i), "alice", fmt.Sprint("fresh-", i)) // a fresh conversation each
	}
	wantAdviceTaken(t, a.s.Advise("ctl", advise(ks[0].ID, "rev", msg.VerdictApprove)))
	wantAdviceTaken(t, a.s.Advise("ctl", advise(ks[1].ID, "rev", msg.VerdictDeny)))
	day := utcDay(a.clk.Now())
	spent := fmt.Sprintf("agent answers spent: 2 of 2 for agent alice today, the bound of agent answers per day; this ask waits for a human (the day refills at %s)", nextUTCDay(day))
	before := a.kinds()
	wantAdviceRefused(t, a.s.Advise("ctl", advise(ks[2].ID, "rev", msg.VerdictApprove)), spent)
	wantAdviceTaken(t, a.s.Advise("ctl", advise(ks[2].ID, "rev", msg.VerdictWait))) // a wait is not counted, nor held to it
	if after := a.kinds(); after[hostlog.KindAskAnswer] != before[hostlog.KindAskAnswer] {
		t.Fatalf("the answer past the bound was journaled: %v", after)
	}
	// Another asking agent has its own day.
	wantAdviceTaken(t, a.s.Advise("ctl", advise(a.raise("b0", "bob", "c1").ID, "rev", msg.VerdictApprove)))
	a.reopen()
	wantAdviceRefused(t, a.s.Advise("ctl", advise(ks[3].ID, "rev", msg.VerdictApprove)), spent)
	if v, err := a.s.AnswerAsk(ks[3].ID, human(msg.VerdictApprove, 1001, "")); err != nil || v.State != msg.AskApproved {
		t.Fatalf("a human answers past the bound: %+v %v", v, err)
	}
	a.clk.Set(time.UnixMilli((day + 1) * 86_400_000).Add(time.Minute))
	wantAdviceTaken(t, a.s.Advise("ctl", advise(ks[4].ID, "rev", msg.VerdictApprove)))
	a.wantSnapshotSame()
}

// TestAdvisorAnswersPerDayDefaultAndZero: no bound given is
// msg.DefaultAgentAnswersPerDay, over conversations; 0 is none.
func TestAdvisorAnswersPerDayDefaultAndZero(t *testing.T) {
	none := withAdvisors(nil, "rev")
	none.AgentAnswersPerDay = u64(0)
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(nil, "rev"), "bob": none})
	for i := range msg.DefaultAgentAnswersPerDay {
		wantAdviceTaken(t, a.s.Advise("ctl", advise(a.raise(fmt.Sprint("a", i), "alice", fmt.Sprint("c", i)).ID, "rev", msg.VerdictApprove)))
	}
	next := nextUTCDay(utcDay(a.clk.Now()))
	wantAdviceRefused(t, a.s.Advise("ctl", advise(a.raise("a-past", "alice", "c-past").ID, "rev", msg.VerdictApprove)),
		fmt.Sprintf("agent answers spent: 10 of 10 for agent alice today, the bound of agent answers per day; this ask waits for a human (the day refills at %s)", next))
	wantAdviceRefused(t, a.s.Advise("ctl", advise(a.raise("b1", "bob", "c1").ID, "rev", msg.VerdictDeny)),
		fmt.Sprintf("agent answers spent: 0 of 0 for agent bob today, the bound of agent answers per day; this ask waits for a human (the day refills at %s)", next))
}

// TestAskPendingPerAgent: with the bound at 2, an agent's third pending
// ask is refused naming it, before anything is journaled (no ask record,
// no attempt, no call counted); an answer frees a place; another agent
// has its own.
func TestAskPendingPerAgent(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly(), "bob": humansOnly()})
	a.s.askBounds = views.AskBounds{PerAgent: 2}.WithDefaults()
	k1, _ := a.raiseSized("a1", "alice", "c1", 10)
	if _, err := a.raiseSized("a2", "alice", "c1", 10); err != nil {
		t.Fatal(err)
	}
	before := a.kinds()
	_, err := a.raiseSized("a3", "alice", "c2", 10)
	wantRaiseRefused(t, err, "2 asks of agent alice are pending, the bound of pending asks per agent"+pendingTail)
	if after := a.kinds(); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused raise journaled: %v, before %v", after, before)
	}
	if v, _ := a.s.AgentShow("ctl", "alice"); v.CallsToday != 2 {
		t.Fatalf("calls counted %d, want the two raised", v.CallsToday)
	}
	if _, err := a.raiseSized("b1", "bob", "c1", 10); err != nil {
		t.Fatalf("bob's own bound: %v", err)
	}
	if _, err := a.s.AnswerAsk(k1.ID, human(msg.VerdictDeny, 1001, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.raiseSized("a3", "alice", "c2", 10); err != nil {
		t.Fatalf("after an answer: %v", err)
	}
}

// TestAskPendingPerController: the controller's bound counts every
// agent's pending asks; an ask past its expiry no longer holds a place.
func TestAskPendingPerController(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly(), "bob": humansOnly()})
	a.s.askBounds = views.AskBounds{PerController: 3}.WithDefaults()
	for i, agent := range []string{"alice", "alice", "bob"} {
		if _, err := a.raiseSized(fmt.Sprint("a", i), agent, "c1", 10); err != nil {
			t.Fatal(err)
		}
	}
	before := a.kinds()
	_, err := a.raiseSized("b9", "bob", "c1", 10)
	wantRaiseRefused(t, err, "3 asks of this controller's agents are pending, the bound of pending asks per controller"+pendingTail)
	if after := a.kinds(); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused raise journaled: %v, before %v", after, before)
	}
	a.s.mu.Lock()
	_, known := a.s.st.Attempts["b9"]
	a.s.mu.Unlock()
	if known {
		t.Fatal("the refused raise's attempt is known")
	}
	a.clk.Add(msg.DefaultApprovalExpiry + time.Minute)
	a.s.expireForRead("") // the host's expiry timer, which a store a test opened has not
	if _, err := a.raiseSized("b9", "bob", "c1", 10); err != nil {
		t.Fatalf("once the others expired: %v", err)
	}
}

// TestAskPendingBytes: the bytes of a controller's pending asks' calls
// are bounded: an ask that would pass the bound is refused naming it; one
// exactly at it is taken.
func TestAskPendingBytes(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly(), "bob": humansOnly()})
	k1, err := a.raiseSized("a1", "alice", "c1", 60_000)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(k1.Body))
	a.s.askBounds = views.AskBounds{BytesPerController: 2*size - 1}.WithDefaults()
	before := a.kinds()
	_, err = a.raiseSized("a2", "bob", "c1", 60_000)
	wantRaiseRefused(t, err, fmt.Sprintf("the pending asks of this controller's agents hold %d bytes of calls and this call's %d would pass the bound of %d bytes of pending asks per controller",
		size, size, 2*size-1)+pendingTail)
	if after := a.kinds(); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused raise journaled: %v, before %v", after, before)
	}
	a.s.askBounds.BytesPerController = 2 * size
	if _, err := a.raiseSized("a2", "bob", "c1", 60_000); err != nil {
		t.Fatalf("exactly at the bound: %v", err)
	}
}

// TestAskCountsACall: raising an ask counts one call of the agent's day,
// from its record (a restart refills nothing); at calls per day 2 the
// third raise is refused naming the limit, nothing journaled. The call an
// approved ask goes on to counts no second call: its reservation counts
// its charge alone, and its admission again is not held to the day's
// calls (the host tests deliver it at calls per day 1).
func TestAskCountsACall(t *testing.T) {
	a := newAskStore(t, nil)
	if _, err := a.s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice", Approval: humansOnly(), CallsPerDay: u64(2)}); err != nil {
		t.Fatal(err)
	}
	k1, _ := a.raiseSized("a1", "alice", "c1", 10)
	if _, err := a.raiseSized("a2", "alice", "c2", 10); err != nil {
		t.Fatal(err)
	}
	before := a.kinds()
	_, err := a.raiseSized("a3", "alice", "c3", 10)
	day := utcDay(a.clk.Now())
	wantRaiseRefused(t, err, "the daily call limit for this agent is reached: it refills at "+nextUTCDay(day))
	if after := a.kinds(); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused raise journaled: %v, before %v", after, before)
	}
	a.reopen()
	if v, _ := a.s.AgentShow("ctl", "alice"); v.CallsToday != 2 {
		t.Fatalf("after a restart %d calls, want 2", v.CallsToday)
	}
	a.s.mu.Lock()
	counted := a.s.st.askCounted("a1")
	a.s.st.agentHold("a1", "ctl", "alice", "c1", day, 4)
	u := *a.s.st.AgentUse[agentKey{"ctl", "alice"}]
	a.s.st.agentUnhold("a1", "ctl", "alice", "c1", day, 4)
	after := *a.s.st.AgentUse[agentKey{"ctl", "alice"}]
	a.s.mu.Unlock()
	if !counted || u.Calls != 2 || u.Credits != 4 || after.Calls != 2 || after.Credits != 0 {
		t.Fatalf("an asked attempt's hold: counted %v, held %+v, given back %+v", counted, u, after)
	}
	_ = k1
	a.wantSnapshotSame()
}

// TestAskWithoutDayCountsNone: an ask record of a host before asks
// counted calls (no day) replays counting none, as it did.
func TestAskWithoutDayCountsNone(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": humansOnly()})
	a.raise("a1", "alice", "c1") // CallDay 0: the record has no day
	a.reopen()
	if v, _ := a.s.AgentShow("ctl", "alice"); v.CallsToday != 0 {
		t.Fatalf("an ask without a day counted %d calls", v.CallsToday)
	}
}

// TestAskPages: 40 asks of 60 KB each (2.4 MB, past the reply frame) are
// listed, pending and all, to an advisor, and as events, in pages each
// at most msg.AsksPageBytes encoded and msg.MaxAsksListed long, which
// together are every ask once, oldest first. The events read their
// arguments from the ask: the state's events hold none.
func TestAskPages(t *testing.T) {
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": withAdvisors(nil, "rev")})
	a.s.askBounds = views.AskBounds{PerAgent: 100}.WithDefaults()
	var want []string
	for i := range 40 {
		k, err := a.raiseSized(fmt.Sprintf("a%02d", i), "alice", "c1", 60_000)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, k.ID)
	}
	follow := func(name string, page func(after uint64) ([]msg.AskView, uint64)) {
		t.Helper()
		var got []string
		pages := 0
		for after := uint64(0); ; pages++ {
			vs, next := page(after)
			if b, _ := wire.Marshal(vs); len(b) > msg.AsksPageBytes || len(vs) == 0 || len(vs) > msg.MaxAsksListed {
				t.Fatalf("%s: a page of %d asks, %d bytes", name, len(vs), len(b))
			}
			for _, v := range vs {
				got = append(got, v.ID)
			}
			if next == 0 {
				break
			}
			after = next
		}
		if !reflect.DeepEqual(got, want) || pages < 9 {
			t.Fatalf("%s: %d pages listed %v, want %v", name, pages+1, got, want)
		}
	}
	follow("pending", func(after uint64) ([]msg.AskView, uint64) {
		vs, next, err := a.s.AskListPage(false, after)
		if err != nil {
			t.Fatal(err)
		}
		return vs, next
	})
	follow("all", func(after uint64) ([]msg.AskView, uint64) {
		vs, next, err := a.s.AskListPage(true, after)
		if err != nil {
			t.Fatal(err)
		}
		return vs, next
	})
	follow("advisor", func(after uint64) ([]msg.AskView, uint64) {
		vs, next, err := a.s.AdvisorAsksPage("ctl", "rev", after)
		if err != nil {
			t.Fatal(err)
		}
		return vs, next
	})
	var got []string
	for after := uint64(0); ; {
		evs, cursor, err := a.s.AskEvents(t.Context(), after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := wire.Marshal(evs); len(b) > msg.AsksPageBytes {
			t.Fatalf("an event batch of %d bytes", len(b))
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			got = append(got, e.Ask.ID)
			if len(e.Ask.Arguments) < 60_000 {
				t.Fatalf("event of %s without its arguments", e.Ask.ID)
			}
		}
		after = cursor
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	for _, e := range a.s.st.AskEvents {
		if e.Ask.Arguments != nil {
			t.Fatalf("the state's event of %s holds the call's arguments", e.Ask.ID)
		}
	}
}

// TestAskBoundsSnapshot: the new counts (asks' calls and advisors' day
// answers) are the snapshot's as replay's, at every record of the journal.
func TestAskBoundsSnapshot(t *testing.T) {
	pol := withAdvisors(nil, "rev")
	a := newAskStore(t, map[string]*msg.ApprovalPolicy{"alice": pol})
	for i := range 3 {
		k, err := a.raiseSized(fmt.Sprint("a", i), "alice", fmt.Sprint("c", i), 100)
		if err != nil {
			t.Fatal(err)
		}
		wantAdviceTaken(t, a.s.Advise("ctl", advise(k.ID, "rev", msg.VerdictApprove)))
	}
	a.reopen()
	st := a.s.st
	if u := st.AgentUse[agentKey{"ctl", "alice"}]; u == nil || u.Advised != 3 || u.Calls != 3 {
		t.Fatalf("replayed counts: %+v", u)
	}
	a.wantSnapshotSame()
	var recs []journal.Record
	if err := a.s.j.Iterate(1, func(r journal.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	for m := range recs {
		prefix := &replayer{st: newState(), pub: a.s.pub}
		for _, r := range recs[:m+1] {
			if err := prefix.record(r); err != nil {
				t.Fatal(err)
			}
		}
		b, err := encodeState(prefix.st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeState(b)
		if err != nil {
			t.Fatal(err)
		}
		rest := &replayer{st: got, pub: a.s.pub}
		for _, r := range recs[m+1:] {
			if err := rest.record(r); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got.AgentUse, st.AgentUse) {
			t.Fatalf("snapshot after record %d: %+v, want %+v", m+1, got.AgentUse, st.AgentUse)
		}
	}
}
