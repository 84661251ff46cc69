package host_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/views"
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
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 14, Price: 7})
	w.Serve(t)
	cl := w.Dial(t)
	adm := openAdmin(t, w.Store)
	defer adm.Close()

	// The kill switch, pulled during the consent wait through the admin
	// socket; the hook's error is read back here, not failed in the peer.
	hookErr := make(chan error, 1)
	during := func(req admin.Request) {
		f := func() { _, err := adm.Do(req); hookErr <- err }
		w.Peer.BeforeConsent.Store(&f)
	}
	after := func() {
		t.Helper()
		w.Peer.BeforeConsent.Store(nil)
		if err := <-hookErr; err != nil {
			t.Fatal(err)
		}
	}

	during(admin.Request{Op: admin.OpPurseFreeze, Name: "ctl"})
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "fz1", "calc.evaluate", `{"expression":"1+1"}`))
	after()
	peertest.WantExactRefusal(t, res, msg.CodeFrozen, "the purse is frozen: calls resume when the operator thaws it"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	wantRefusedReceipt(t, w, cl, "fz1", "refused after the payer's consent, before anything was sent: the purse is frozen: calls resume when the operator thaws it"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged", true)

	if _, err := adm.Do(admin.Request{Op: admin.OpPurseThaw, Name: "ctl"}); err != nil {
		t.Fatal(err)
	}
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("ok1: %+v", res)
	}

	during(admin.Request{Op: admin.OpGrantRevoke, Name: w.Grant})
	res = peertest.Call(t, cl, peertest.InvokeDispatch(t, "rv1", "calc.evaluate", `{"expression":"1+1"}`))
	after()
	peertest.WantExactRefusal(t, res, msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application app is revoked: calls resume once the operator issues a new grant"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	wantRefusedReceipt(t, w, cl, "rv1", "refused after the payer's consent, before anything was sent: the grant that covers operation calc.evaluate of application app is revoked: calls resume once the operator issues a new grant"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged", true)
	// A new grant: the second paid call spends the purse's last 7.
	if _, err := adm.Do(admin.Request{Op: admin.OpGrantIssue, Grant: &admin.Grant{Controller: "ctl", Application: "app", Price: 7, PerDay: 10,
		NotAfter: time.Now().Add(time.Hour).UnixMilli()}}); err != nil {
		t.Fatal(err)
	}
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok2", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("ok2: %+v", res)
	}
	peertest.WantExactRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "no1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeInsufficient,
		"the purse has too few credits for this call: calls resume when the operator funds it")
	if got := w.App.Calls.Load(); got != 2 {
		t.Fatalf("the application was called %d times, want 2 (ok1 and ok2)", got)
	}
	// The payer consented four times; only ok1 and ok2 were journaled.
	if n := w.Peer.Reserves.Load(); n != 4 {
		t.Fatalf("%d reserve callbacks, want 4", n)
	}
	adm.Close()
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p != (views.PurseView{Controller: "ctl", Funded: 14, Charged: 14}) {
			t.Fatalf("purse %+v", p)
		}
		rep, err := audit.VerifyStore(w.Store)
		// the two answers and the two refusals after consent
		if err != nil || rep.Receipts != 4 || rep.Purses[0].Balance != 0 {
			t.Fatalf("verify: %+v %v", rep, err)
		}
	})
}

// TestExpiredDuringConsentWait: a grant whose validity ends while the host
// waits for the consent (the injected clock moves past it) stops the call.
func TestExpiredDuringConsentWait(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7})
	clk := peertest.NewClock(time.Now())
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)
	f := func() { clk.Add(2 * time.Hour) } // the world's grant is valid one hour
	w.Peer.BeforeConsent.Store(&f)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ex1", "calc.evaluate", `{"expression":"1+1"}`))
	w.Peer.BeforeConsent.Store(nil)
	peertest.WantExactRefusal(t, res, msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application app is not in force: calls resume once the operator issues a grant in force"+
		"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	if got := w.App.Calls.Load(); got != 0 {
		t.Fatalf("the application was called %d times", got)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
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
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 1, PerDay: 2})
	start := time.Now()
	clk := peertest.NewClock(start)
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"d1", "d2"} {
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	daily := dailyLimitReason(utcDay(start))
	peertest.WantExactRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "d3", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, daily)
	clk.Add(-24 * time.Hour)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "d4", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, daily)
	w.Stop()
	w.Serve(t) // the clock is still a day behind: replay keeps the latest day
	cl = w.Dial(t)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "d5", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, daily)
	if got := w.App.Calls.Load(); got != 2 {
		t.Fatalf("the application was called %d times, want 2", got)
	}

	// The grant (valid one hour from start) expires; set back, it stays so.
	clk.Set(start.Add(2 * time.Hour))
	expired := "the grant that covers operation calc.evaluate of application app is not in force: calls resume once the operator issues a grant in force"
	peertest.WantExactRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "e1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, expired)
	clk.Set(start)
	peertest.WantExactRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "e2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, expired)
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 98 || p.Charged != 2 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestFilteredListingHidesWhatItHid: through a grant covering two of the
// application's operations, a listing pages over those two alone: its
// offsets and next_offset count covered operations, so no page, offset or
// next_offset tells how many operations the grant hid.
func TestFilteredListingHidesWhatItHid(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Ops: []string{"calc.*", "units.convert"}})
	w.Serve(t)
	cl := w.Dial(t)
	page := func(id string, offset, limit int) ([]string, *int) {
		t.Helper()
		req, err := oracleops.BuildList("/v1", oracleops.ListQuery{Limit: limit, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		res := peertest.Call(t, cl, msg.Dispatch{Attempt: id, Method: req.Method, Path: req.Path, Agent: peertest.Agent})
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
