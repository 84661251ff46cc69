package operator

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// TestStoppedDuringConsentWait: a freeze and a revoke that land while the
// host waits for the payer's consent stop the call already admitted: the
// consent arrives, the host checks again, nothing is delivered, nothing is
// charged, the hold is dropped and the attempt is not-seen. The purse holds
// exactly two charges: a hold left behind by a stopped call would refuse
// the second paid call.
func TestStoppedDuringConsentWait(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 14, price: 7})
	w.serve(t)
	cl := w.dial(t)
	adm := admin(t, w.store)
	defer adm.Close()

	// The kill switch, pulled during the consent wait through the admin
	// socket; the hook's error is read back here, not failed in the peer.
	hookErr := make(chan error, 1)
	during := func(req AdminRequest) {
		f := func() { _, err := adm.Do(req); hookErr <- err }
		w.peer.beforeConsent.Store(&f)
	}
	after := func() {
		t.Helper()
		w.peer.beforeConsent.Store(nil)
		if err := <-hookErr; err != nil {
			t.Fatal(err)
		}
	}

	during(AdminRequest{Op: OpPurseFreeze, Name: "ctl"})
	res := call(t, cl, invokeDispatch(t, "fz1", "calc.evaluate", `{"expression":"1+1"}`))
	after()
	wantExactRefusal(t, res, msg.CodeFrozen, "the purse is frozen: calls resume when the operator thaws it"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	wantRefusedReceipt(t, w, cl, "fz1", "refused after the payer's consent, before anything was sent: the purse is frozen: calls resume when the operator thaws it"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged", true)

	if _, err := adm.Do(AdminRequest{Op: OpPurseThaw, Name: "ctl"}); err != nil {
		t.Fatal(err)
	}
	if res := call(t, cl, invokeDispatch(t, "ok1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("ok1: %+v", res)
	}

	during(AdminRequest{Op: OpGrantRevoke, Name: w.grant})
	res = call(t, cl, invokeDispatch(t, "rv1", "calc.evaluate", `{"expression":"1+1"}`))
	after()
	wantExactRefusal(t, res, msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application app is revoked: calls resume once the operator issues a new grant"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	wantRefusedReceipt(t, w, cl, "rv1", "refused after the payer's consent, before anything was sent: the grant that covers operation calc.evaluate of application app is revoked: calls resume once the operator issues a new grant"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged", true)
	// A new grant: the second paid call spends the purse's last 7.
	if _, err := adm.Do(AdminRequest{Op: OpGrantIssue, Grant: &AdminGrant{Controller: "ctl", Application: "app", Price: 7, PerDay: 10,
		NotAfter: time.Now().Add(time.Hour).UnixMilli()}}); err != nil {
		t.Fatal(err)
	}
	if res := call(t, cl, invokeDispatch(t, "ok2", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("ok2: %+v", res)
	}
	wantExactRefusal(t, call(t, cl, invokeDispatch(t, "no1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeInsufficient,
		"the purse has too few credits for this call: calls resume when the operator funds it")
	if got := w.app.calls.Load(); got != 2 {
		t.Fatalf("the application was called %d times, want 2 (ok1 and ok2)", got)
	}
	// The payer consented four times; only ok1 and ok2 were journaled.
	if n := w.peer.reserves.Load(); n != 4 {
		t.Fatalf("%d reserve callbacks, want 4", n)
	}
	adm.Close()
	w.stop()
	w.withStore(t, func(s *Store) {
		if p, _ := s.PurseShow("ctl"); p != (PurseView{Controller: "ctl", Funded: 14, Charged: 14}) {
			t.Fatalf("purse %+v", p)
		}
		rep, err := s.VerifyReceipts(1)
		// the two answers and the two refusals after consent
		if err != nil || rep.Receipts != 4 || rep.Purses[0].Balance != 0 {
			t.Fatalf("verify: %+v %v", rep, err)
		}
	})
}

// TestExpiredDuringConsentWait: a grant whose validity ends while the host
// waits for the consent (the injected clock moves past it) stops the call.
func TestExpiredDuringConsentWait(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 100, price: 7})
	clk := newTestClock(time.Now())
	w.now = clk.now
	w.serve(t)
	cl := w.dial(t)
	f := func() { clk.add(2 * time.Hour) } // the world's grant is valid one hour
	w.peer.beforeConsent.Store(&f)
	res := call(t, cl, invokeDispatch(t, "ex1", "calc.evaluate", `{"expression":"1+1"}`))
	w.peer.beforeConsent.Store(nil)
	wantExactRefusal(t, res, msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application app is not in force: calls resume once the operator issues a grant in force"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	if got := w.app.calls.Load(); got != 0 {
		t.Fatalf("the application was called %d times", got)
	}
	w.stop()
	w.withStore(t, func(s *Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 100 || p.Charged != 0 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestClockSetBack: with the injected clock, a clock set back a day
// refills no daily count (2 allowed: the third call is refused, before
// and after the clock goes back, and after a restart with the clock still
// behind), and revives no expired grant.
func TestClockSetBack(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 100, price: 1, perDay: 2})
	start := time.Now()
	clk := newTestClock(start)
	w.now = clk.now
	w.serve(t)
	cl := w.dial(t)
	for _, id := range []string{"d1", "d2"} {
		if res := call(t, cl, invokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	daily := dailyLimitReason(utcDay(start))
	wantExactRefusal(t, call(t, cl, invokeDispatch(t, "d3", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, daily)
	clk.add(-24 * time.Hour)
	wantExactRefusal(t, call(t, cl, invokeDispatch(t, "d4", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, daily)
	w.stop()
	w.serve(t) // the clock is still a day behind: replay keeps the latest day
	cl = w.dial(t)
	wantExactRefusal(t, call(t, cl, invokeDispatch(t, "d5", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, daily)
	if got := w.app.calls.Load(); got != 2 {
		t.Fatalf("the application was called %d times, want 2", got)
	}

	// The grant (valid one hour from start) expires; set back, it stays so.
	clk.set(start.Add(2 * time.Hour))
	expired := "the grant that covers operation calc.evaluate of application app is not in force: calls resume once the operator issues a grant in force"
	wantExactRefusal(t, call(t, cl, invokeDispatch(t, "e1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, expired)
	clk.set(start)
	wantExactRefusal(t, call(t, cl, invokeDispatch(t, "e2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, expired)
	w.stop()
	w.withStore(t, func(s *Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 98 || p.Charged != 2 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// testClock is an injected wall clock.
type testClock struct{ ms atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.set(t)
	return c
}

func (c *testClock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *testClock) set(t time.Time)     { c.ms.Store(t.UnixMilli()) }
func (c *testClock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func wantExactRefusal(t testing.TB, res msg.DispatchResult, code, reason string) {
	t.Helper()
	if res.Outcome != msg.StateRefused || res.Refusal == nil {
		t.Fatalf("want refusal %s, got outcome %s status %d %s (%s)", code, res.Outcome, res.Status, res.Body, res.Detail)
	}
	if res.Refusal.Code != code || res.Refusal.Reason != reason {
		t.Fatalf("want refusal %s: %q\ngot %s: %q", code, reason, res.Refusal.Code, res.Refusal.Reason)
	}
	wantNoInternals(t, res.Refusal.Reason)
}

// TestFilteredListingHidesWhatItHid: through a grant covering two of the
// application's operations, a listing pages over those two alone: its
// offsets and next_offset count covered operations, so no page, offset or
// next_offset tells how many operations the grant hid.
func TestFilteredListingHidesWhatItHid(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 10, ops: []string{"calc.*", "units.convert"}})
	w.serve(t)
	cl := w.dial(t)
	page := func(id string, offset, limit int) ([]string, *int) {
		t.Helper()
		req, err := oracleops.BuildList("/v1", oracleops.ListQuery{Limit: limit, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		res := call(t, cl, msg.Dispatch{Attempt: id, Method: req.Method, Path: req.Path})
		if res.Outcome != msg.StateDefinite || res.Status != 200 {
			t.Fatalf("%s: %+v", id, res)
		}
		var lr struct {
			NextOffset *int                  `json:"next_offset"`
			Operations []struct{ ID string } `json:"operations"`
		}
		if err := json.Unmarshal(res.Body, &lr); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, o := range lr.Operations {
			ids = append(ids, o.ID)
		}
		return ids, lr.NextOffset
	}
	want := func(id string, offset, limit int, ids string, next int) {
		t.Helper()
		got, n := page(id, offset, limit)
		gotNext := -1
		if n != nil {
			gotNext = *n
		}
		if strings.Join(got, ",") != ids || gotNext != next {
			t.Fatalf("%s (offset %d, limit %d): %v next %d, want [%s] next %d", id, offset, limit, got, gotNext, ids, next)
		}
	}
	want("p1", 0, 1, "calc.evaluate", 1)
	want("p2", 1, 1, "units.convert", -1)
	want("p3", 2, 1, "", -1)
	want("p4", 0, 50, "calc.evaluate,units.convert", -1)
	// Probing offsets the application would list hidden operations at
	// shows nothing more.
	want("p5", 5, 1, "", -1)
}
