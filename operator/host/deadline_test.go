package host_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/heldapp"
	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// deadlinePassedText is the refusal of a dispatch whose deadline passed
// (operator's deadlinePassedReason).
const deadlinePassedText = "the call's deadline passed before the host could deliver it; nothing was reserved or charged"

// journalLastSeq is the sequence number of the last record of the host
// journal of store, read-only.
func journalLastSeq(t *testing.T, store string) uint64 {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	return j.LastSeq()
}

// dispatchWithDeadline is d with a deadline.
func dispatchWithDeadline(d msg.Dispatch, deadline int64) msg.Dispatch {
	d.Deadline = deadline
	return d
}

// TestDeadlinePassedBeforeAdmission: a dispatch whose deadline passed more
// than msg.DeadlineTolerance ago by the host's clock is refused before anything is
// admitted: no consent asked, nothing delivered, the journal, the purse and
// the grant's daily count unchanged, the attempt not-seen. One exactly
// msg.DeadlineTolerance past its deadline is still admitted.
func TestDeadlinePassedBeforeAdmission(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 5, PerDay: 1})
	clk := peertest.NewClock(time.Now())
	w.Now = clk.Now
	before := journalLastSeq(t, w.Store)
	w.Serve(t)
	cl := w.Dial(t)
	tol := msg.DeadlineTolerance.Milliseconds()

	late := clk.Now().UnixMilli() - tol - 1
	res := peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "late1", "calc.evaluate", `{"expression":"1+1"}`), late))
	peertest.WantExactRefusal(t, res, msg.CodeDeadlinePassed, "the call's deadline passed before the host could deliver it; nothing was reserved or charged")
	// A describe (free: no consent) is refused the same way.
	res = peertest.Call(t, cl, dispatchWithDeadline(peertest.DescribeDispatch(t, "late2", "calc.evaluate"), late))
	peertest.WantExactRefusal(t, res, msg.CodeDeadlinePassed, deadlinePassedText)
	if in := peertest.Inspect(t, cl, "late1"); in.State != msg.StateNotSeen {
		t.Fatalf("inspect late1: %+v", in)
	}
	if n, got := w.Peer.Reserves.Load(), w.App.Calls.Load(); n != 0 || got != 0 {
		t.Fatalf("%d reserve callbacks and %d application calls, want none", n, got)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if after := journalLastSeq(t, w.Store); after != before {
			t.Fatalf("the journal went from seq %d to %d: a refused dispatch journaled something", before, after)
		}
		if p, _ := s.PurseShow("ctl"); p != (views.PurseView{Controller: "ctl", Funded: 10, Balance: 10}) {
			t.Fatalf("purse %+v", p)
		}
	})

	// Exactly at the tolerance: admitted. (It has no time left for the
	// delivery, so it ends not sent and releases what it held.)
	w.Serve(t)
	cl = w.Dial(t)
	edge := clk.Now().UnixMilli() - tol
	res = peertest.Call(t, cl, dispatchWithDeadline(peertest.DescribeDispatch(t, "edge1", "calc.evaluate"), edge))
	if res.Outcome != msg.StateNotSent {
		t.Fatalf("edge1 (deadline exactly %v ago): %+v", msg.DeadlineTolerance, res)
	}
	// The grant's daily count of 1 is still there: a call in time uses it.
	ahead := clk.Now().UnixMilli() + 60_000
	if res := peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "ok1", "calc.evaluate", `{"expression":"1+1"}`), ahead)); res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("ok1: %+v", res)
	}
	peertest.WantExactRefusal(t, peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "next1", "calc.evaluate", `{"expression":"1+1"}`), ahead)),
		msg.CodeDailyLimit, dailyLimitReason(utcDay(clk.Now())))
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Charged != 5 || p.Balance != 5 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestDeadlineDuringConsentWait: a deadline that runs out while the host
// waits for the payer's consent stops the call at the last moment, under
// the reservation's lock: the consent arrives (the injected clock has moved
// past the deadline), nothing is reserved, delivered or charged. A consent
// that does not come before the deadline (the controller holds it) is not
// waited for past it: the host gives up at the deadline plus the tolerance
// and refuses the same way.
func TestDeadlineDuringConsentWait(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 5})
	clk := peertest.NewClock(time.Now())
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)

	f := func() { clk.Add(10 * time.Second) }
	w.Peer.BeforeConsent.Store(&f)
	res := peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "cw1", "calc.evaluate", `{"expression":"1+1"}`), clk.Now().UnixMilli()+5_000))
	w.Peer.BeforeConsent.Store(nil)
	peertest.WantExactRefusal(t, res, msg.CodeDeadlinePassed, deadlinePassedText)
	if n := w.Peer.Reserves.Load(); n != 1 {
		t.Fatalf("%d reserve callbacks, want 1", n)
	}

	// The controller holds its consent: the host's wait ends at the
	// deadline plus the tolerance (200 ms from now), not at operator.ReserveTimeout.
	release := make(chan struct{})
	defer close(release)
	hold := func() { <-release }
	w.Peer.BeforeConsent.Store(&hold)
	start := time.Now()
	res = peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "cw2", "calc.evaluate", `{"expression":"1+1"}`), clk.Now().UnixMilli()-msg.DeadlineTolerance.Milliseconds()+200))
	waited := time.Since(start)
	w.Peer.BeforeConsent.Store(nil)
	peertest.WantExactRefusal(t, res, msg.CodeDeadlinePassed, deadlinePassedText)
	if waited >= operator.ReserveTimeout {
		t.Fatalf("the host waited %v for the consent, past the deadline", waited)
	}
	// Each ended refused after admission, with a receipt that says so.
	for _, id := range []string{"cw1", "cw2"} {
		if in := peertest.Inspect(t, cl, id); in.State != msg.StateRefused || in.Receipt == nil {
			t.Fatalf("inspect %s: %+v", id, in)
		}
	}
	if got := w.App.Calls.Load(); got != 0 {
		t.Fatalf("the application was called %d times", got)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p != (views.PurseView{Controller: "ctl", Funded: 10, Balance: 10}) {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestDeliveryCutAtDeadline: an application that holds the request is
// waited for until the dispatch's deadline plus the tolerance, not for the
// route's response timeout (5 s here): the attempt ends uncertain then,
// keeping its reservation, and says the deadline passed. A dispatch with
// no time left when delivery begins is not sent and is released.
func TestDeliveryCutAtDeadline(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 5, NoApp: true})
	got := heldapp.Serve(t, w.Route.Upstream)
	clk := peertest.NewClock(time.Now())
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)
	tol := msg.DeadlineTolerance.Milliseconds()

	start := time.Now()
	res := peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "held1", "calc.evaluate", `{"expression":"1+1"}`), clk.Now().UnixMilli()-tol+300))
	waited := time.Since(start)
	if res.Outcome != msg.StateUncertain || res.Detail != "the call's deadline passed before the application answered" {
		t.Fatalf("held1: %+v", res)
	}
	select {
	case <-got:
	default:
		t.Fatal("the application never read the request")
	}
	if waited < 300*time.Millisecond || waited >= time.Duration(w.Route.Timeouts.ResponseMs)*time.Millisecond {
		t.Fatalf("the delivery took %v: not cut at the deadline (300 ms)", waited)
	}
	if in := peertest.Inspect(t, cl, "held1"); in.State != msg.StateUncertain {
		t.Fatalf("inspect held1: %+v", in)
	}

	// No time left once admitted: the deadline is exactly the tolerance
	// ago, in time for admission, and the delivery's bound is now.
	res = peertest.Call(t, cl, dispatchWithDeadline(peertest.DescribeDispatch(t, "none1", "calc.evaluate"), clk.Now().UnixMilli()-tol))
	if res.Outcome != msg.StateNotSent || res.Detail != "the call's deadline passed before the application could be reached" {
		t.Fatalf("none1: %+v", res)
	}
	select {
	case <-got:
		t.Fatal("the application read none1's request")
	default:
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		// held1 keeps its reservation (uncertain); none1 was released.
		if p, _ := s.PurseShow("ctl"); p.Charged != 5 || p.Balance != 5 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestNoDeadlineLoggedOnce: a dispatch without a deadline (a controller
// from before deadlines) is still delivered under the route's timeouts,
// and the host logs that once for the controller, not once a call.
func TestNoDeadlineLoggedOnce(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10})
	var logs hosttest.SyncBuffer
	w.Log = slog.New(slog.NewTextHandler(&logs, nil))
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"old1", "old2", "old3"} {
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	w.Stop()
	if n := strings.Count(logs.String(), "dispatches without a deadline"); n != 1 {
		t.Fatalf("the missing deadline was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestDeadlineAfterClockSetBack: once the wall clock is set back, the
// host's clock for limits stays at the latest time it recorded, but a
// dispatch's deadline (the controller's reading of the same wall clock) is
// compared with the wall clock: calls are not refused as late until the
// clock catches up.
func TestDeadlineAfterClockSetBack(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	clk := peertest.NewClock(time.Now())
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "cb1", "calc.evaluate", `{"expression":"1+1"}`), clk.Now().UnixMilli()+30_000)); res.Outcome != msg.StateDefinite {
		t.Fatalf("cb1: %+v", res)
	}
	clk.Add(-time.Hour)
	if res := peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "cb2", "calc.evaluate", `{"expression":"1+1"}`), clk.Now().UnixMilli()+30_000)); res.Outcome != msg.StateDefinite {
		t.Fatalf("cb2 (clock set back an hour): %+v", res)
	}
	peertest.WantExactRefusal(t, peertest.Call(t, cl, dispatchWithDeadline(peertest.InvokeDispatch(t, "cb3", "calc.evaluate", `{"expression":"1+1"}`), clk.Now().UnixMilli()-msg.DeadlineTolerance.Milliseconds()-1)),
		msg.CodeDeadlinePassed, deadlinePassedText)
}
