package host_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestHistoryWhileServing: a host making a snapshot every 40 records
// serves 120 calls; after a snapshot its memory holds none of them, yet
// the first call's id is still refused as a duplicate, its inspect
// answers its recorded answer and receipt byte for byte, and every call
// is listed in order. Restarted, the host starts from its snapshot and
// answers every read as a store that replays its whole journal (its
// snapshots and index removed) does.
func TestHistoryWhileServing(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 1_000_000, Price: 1})
	w.SnapshotEvery = 40
	w.Serve(t)
	cl := w.Dial(t)
	const calls = 120
	var first msg.DispatchResult
	for i := range calls {
		res := peertest.Call(t, cl, hosttest.Calc(t, fmt.Sprintf("a%03d", i), peertest.Agent, "c1"))
		hosttest.WantAnswer(t, res)
		if i == 0 {
			first = res
		}
	}
	s := w.HostStore()
	if name, err := s.Snapshot(); err != nil || name == "" {
		t.Fatalf("snapshot: %q %v", name, err)
	}
	if attempts, asks, events := s.Held(); attempts != 0 || asks != 0 || events != 0 {
		t.Fatalf("after a snapshot the state holds %d attempts, %d asks, %d events", attempts, asks, events)
	}
	// Memory holds none of them: the index answers.
	again := peertest.Call(t, cl, hosttest.Calc(t, "a000", peertest.Agent, "c1"))
	if again.Refusal == nil || again.Refusal.Code != msg.CodeDuplicate {
		t.Fatalf("a000 again: %+v", again)
	}
	ir := peertest.Inspect(t, cl, "a000")
	if ir.State != msg.StateDefinite || !bytes.Equal(ir.Body, first.Body) || !bytes.Equal(ir.Receipt, first.Receipt) {
		t.Fatalf("inspect a000 after it left memory: %+v, want the first answer", ir)
	}
	listed, left, err := s.Attempts("")
	if err != nil || len(listed) != calls || left != 0 || listed[0].Attempt != "a000" || listed[calls-1].Attempt != fmt.Sprintf("a%03d", calls-1) {
		t.Fatalf("attempts list: %d listed, %d left, %v", len(listed), left, err)
	}
	w.Stop()

	full := withoutHistory(t, w.Store)
	w.WithStore(t, func(s *operator.Store) {
		snap, replayed, refused := s.Loaded()
		if snap == "" || replayed >= 40 || len(refused) != 0 {
			t.Fatalf("restart: snapshot %q, %d replayed, refused %v", snap, replayed, refused)
		}
		r, err := operator.Open(full)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if snap, replayed, _ := r.Loaded(); snap != "" || replayed == 0 {
			t.Fatalf("the copy without history: snapshot %q, %d replayed", snap, replayed)
		}
		sameReads(t, s, r)
	})
}

// sameReads fails unless stores a and b answer alike every read the
// test's world has: the attempts list, each attempt's inspect, the purse.
func sameReads(t *testing.T, a, b *operator.Store) {
	t.Helper()
	la, lefta, erra := a.Attempts("")
	lb, leftb, errb := b.Attempts("")
	if erra != nil || errb != nil || lefta != leftb || !reflect.DeepEqual(la, lb) {
		t.Fatalf("attempts lists differ: %d/%d listed, %d/%d left, %v %v", len(la), len(lb), lefta, leftb, erra, errb)
	}
	for _, v := range la {
		ia, erra := a.AttemptInspect(v.Attempt)
		ib, errb := b.AttemptInspect(v.Attempt)
		if erra != nil || errb != nil || !reflect.DeepEqual(ia, ib) {
			t.Fatalf("inspect %s differs:\n%+v %v\n%+v %v", v.Attempt, ia, erra, ib, errb)
		}
	}
	pa, erra := a.PurseShow("ctl")
	pb, errb := b.PurseShow("ctl")
	if erra != nil || errb != nil || pa != pb {
		t.Fatalf("purses differ: %+v %v / %+v %v", pa, erra, pb, errb)
	}
	if _, err := a.AttemptInspect("never"); err == nil || err.Error() != views.Refusedf("attempt never: the host has no reservation for it").Error() {
		t.Fatalf("inspect of an unknown attempt: %v", err)
	}
}

// TestAskHistoryWhileServing: asks approved and denied, collected, then a
// snapshot: the asks, their attempts and their events leave memory, and
// ask show, approvals list --all, the ask events from the start, a second
// collect and a late answer are answered from the index as before.
func TestAskHistoryWhileServing(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	s := w.HostStore()
	evsBefore := func() []views.AskEvent {
		evs, _, err := s.AskEvents(t.Context(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	var ids []string
	for i, v := range []msg.Verdict{msg.VerdictApprove, msg.VerdictDeny} {
		at := fmt.Sprintf("a%d", i)
		tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, at, "alice", "c1")))
		if _, err := s.AnswerAsk(tk.ID, hosttest.Human(v, 1001, "ann")); err != nil {
			t.Fatal(err)
		}
		hosttest.CollectCall(t, cl, at)
		ids = append(ids, tk.ID)
	}
	shown := make([]msg.AskView, len(ids))
	for i, id := range ids {
		v, err := s.AskShow(id)
		if err != nil {
			t.Fatal(err)
		}
		shown[i] = v
	}
	all, err := s.AskList(true)
	if err != nil || len(all) != 2 {
		t.Fatalf("approvals list --all: %d %v", len(all), err)
	}
	events := evsBefore()
	if len(events) != 4 {
		t.Fatalf("%d ask events, want 4", len(events))
	}
	if name, err := s.Snapshot(); err != nil || name == "" {
		t.Fatalf("snapshot: %q %v", name, err)
	}
	if attempts, asks, evs := s.Held(); attempts != 0 || asks != 0 || evs != 0 {
		t.Fatalf("after a snapshot the state holds %d attempts, %d asks, %d events", attempts, asks, evs)
	}
	for i, id := range ids {
		if v, err := s.AskShow(id); err != nil || !reflect.DeepEqual(v, shown[i]) {
			t.Fatalf("ask show %s from the index: %+v %v, want %+v", id, v, err, shown[i])
		}
	}
	if again, err := s.AskList(true); err != nil || !reflect.DeepEqual(again, all) {
		t.Fatalf("approvals list --all from the index: %+v %v", again, err)
	}
	if again := evsBefore(); !reflect.DeepEqual(again, events) {
		t.Fatalf("ask events from the index: %+v, want %+v", again, events)
	}
	// The denied attempt, from the index, is told its denial again with
	// its receipt (a controller that lost the answer collects again).
	denied := hosttest.CollectCall(t, cl, "a1")
	peertest.WantRefusal(t, denied, msg.CodeDenied, "the call's approval was denied (ask "+ids[1]+", by uid:1001)")
	if r := hosttest.VerifiedReceipt(t, w, denied.Receipt); r.Attempt != "a1" || r.Ask != ids[1] || r.Outcome != msg.StateRefused {
		t.Fatalf("the denial's receipt from the index: %+v", r)
	}
	if _, err := s.AnswerAsk(ids[0], hosttest.Human(msg.VerdictDeny, 1001, "ann")); err == nil || !strings.Contains(err.Error(), "already answered") {
		t.Fatalf("a late answer to an ask in the index: %v", err)
	}
	// A new ask after the snapshot: its events follow the index's.
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	evs, next, err := s.AskEvents(t.Context(), events[len(events)-1].Seq, 0)
	if err != nil || len(evs) != 1 || evs[0].Ask.ID != tk.ID || next != evs[0].Seq {
		t.Fatalf("the events after the index's: %+v %d %v", evs, next, err)
	}
}
