package host_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

const notBehind = "the wall clock (%s) is not behind the latest time the store recorded (%s): there is nothing to accept, and nothing was recorded"

// TestClockAccept: the host's clock is set a year forward, calls are
// recorded on that day (the grant's 2 a day and alice's 3 calls a day
// used up), and the wall clock is set back: the host keeps the far-future
// time (a grant issued now for an hour is refused as not in the future).
// `steward-operator clock accept`, through the running host's admin
// socket, sets the store's time back (exit 0): a grant for an hour is
// issued and a call under it admitted again, while nothing refills (the
// used-up grant and alice's day refuse, naming today's refill), after a
// restart too. An accept when the clock is not behind is refused (exit 2),
// and nothing is journaled.
func TestClockAccept(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 1, NoGrant: true})
	calls := uint64(3)
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "app", Operations: []string{"calc.*"}, Price: 1, PerDay: 2,
			NotAfter: time.Now().Add(2 * 365 * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice", CallsPerDay: &calls}); err != nil {
			t.Fatal(err)
		}
	})
	// The corrected wall clock: after the grant's not-before, on a second.
	start := time.Now().Add(2 * time.Second).Truncate(time.Second)
	forward := start.Add(365 * 24 * time.Hour)
	clk := peertest.NewClock(forward)
	w.Now = clk.Now
	w.Serve(t)
	cl := w.Dial(t)
	units := func(id, agent string) msg.Dispatch {
		return hosttest.AgentInvoke(t, id, agent, "c1", "units.convert", `{"value":"1","from":"mi","to":"km"}`)
	}
	call := func(d msg.Dispatch) msg.DispatchResult {
		t.Helper()
		w.Peer.Principal.Store(&d.Agent) // the payer's consent names the call's agent
		return peertest.Call(t, cl, d)
	}
	hosttest.WantAnswer(t, call(hosttest.Calc(t, "f1", "alice", "c1")))
	hosttest.WantAnswer(t, call(hosttest.Calc(t, "f2", "alice", "c1")))
	peertest.WantExactRefusal(t, call(hosttest.Calc(t, "f3", "bob", "c2")), msg.CodeDailyLimit, dailyLimitReason(utcDay(forward)))

	clk.Set(start) // the wall clock corrected
	adm := openAdmin(t, w.Store)
	defer adm.Close()
	hourGrant := admin.Request{Op: admin.OpGrantIssue, Grant: &admin.Grant{Controller: "ctl", Application: "app", Operations: []string{"units.*"},
		Price: 1, PerDay: 10, NotAfter: start.Add(time.Hour).UnixMilli()}}
	if _, err := adm.Do(hourGrant); err == nil {
		t.Fatal("a grant for the hour from now was issued while the store's clock was a year ahead")
	}
	code, out, errs := hosttest.RunCLI("clock", "accept", "--store", w.Store, "--json")
	if code != 0 {
		t.Fatalf("clock accept: exit %d: %s", code, errs)
	}
	var v views.ClockView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("clock accept --json: %v: %s", err, out)
	}
	at := start.UTC().Format(time.RFC3339)
	if v.At != at || v.Day != start.UTC().Format(time.DateOnly) || v.Was < forward.UTC().Format(time.RFC3339) || v.Grants != 1 || v.Agents != 1 {
		t.Fatalf("clock accept: %+v", v)
	}

	// Admitted again: a grant for the hour from now, and a call under it
	// (alice's third call of the day).
	if _, err := adm.Do(hourGrant); err != nil {
		t.Fatalf("a grant for the hour from now after the accept: %v", err)
	}
	hosttest.WantAnswer(t, call(units("n1", "alice")))
	// Nothing refilled: the grant's 2 and alice's 3 count on today.
	today := utcDay(start)
	peertest.WantExactRefusal(t, call(hosttest.Calc(t, "n2", "bob", "c2")), msg.CodeDailyLimit, dailyLimitReason(today))
	agentDay := "the daily call limit for this agent is reached: it refills at " + nextUTCDay(today)
	peertest.WantExactRefusal(t, call(units("n3", "alice")), msg.CodeAgentLimit, agentDay)

	// Not behind now: refused (exit 2), nothing journaled.
	code, _, errs = hosttest.RunCLI("clock", "accept", "--store", w.Store)
	if want := "steward-operator clock accept: refused: " + fmt.Sprintf(notBehind, at, at) + "\n"; code != 2 || errs != want {
		t.Fatalf("a second accept: exit %d %q, want 2 %q", code, errs, want)
	}
	adm.Close()
	w.Stop()
	if n := hosttest.Kinds(t, w.Store)[hostlog.KindClockAccept]; n != 1 {
		t.Fatalf("%d clock-accept records, want 1", n)
	}

	// Replayed after a restart: the same day, nothing refilled.
	w.Serve(t)
	cl = w.Dial(t)
	peertest.WantExactRefusal(t, call(hosttest.Calc(t, "r1", "bob", "c2")), msg.CodeDailyLimit, dailyLimitReason(today))
	peertest.WantExactRefusal(t, call(units("r2", "alice")), msg.CodeAgentLimit, agentDay)
	hosttest.WantAnswer(t, call(units("r3", "bob")))
	w.Stop()
}

// TestClockAcceptStoppedStore: on a stopped store that recorded a
// reservation a day ahead, `clock accept` opens the store itself and
// accepts the real wall clock (exit 0); a second one is refused (exit 2);
// a usage error is refused (exit 2) and a store that is not one fails
// (exit 1).
func TestClockAcceptStoppedStore(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 1, NoGrant: true})
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "app", Price: 1, PerDay: 2, NotAfter: time.Now().Add(72 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	})
	// A reservation's day is what the journal keeps of the store's clock
	// (the record times are the machine's): a day ahead.
	clk := peertest.NewClock(time.Now().Add(24 * time.Hour))
	w.Now = clk.Now
	w.Serve(t)
	hosttest.WantAnswer(t, peertest.Call(t, w.Dial(t), peertest.InvokeDispatch(t, "f1", "calc.evaluate", `{"expression":"1+1"}`)))
	w.Stop()
	if code, out, errs := hosttest.RunCLI("clock", "accept", "--store", w.Store); code != 0 || errs != "" {
		t.Fatalf("clock accept on the stopped store: exit %d %q %q", code, out, errs)
	}
	code, _, errs := hosttest.RunCLI("clock", "accept", "--store", w.Store)
	if code != 2 || errs == "" {
		t.Fatalf("a second accept: exit %d %q", code, errs)
	}
	if code, _, errs := hosttest.RunCLI("clock", "accept", "now", "--store", w.Store); code != 2 {
		t.Fatalf("clock accept now: exit %d %q", code, errs)
	}
	if code, _, errs := hosttest.RunCLI("clock", "accept", "--store", t.TempDir()); code != 1 {
		t.Fatalf("clock accept on no store: exit %d %q", code, errs)
	}
	if n := hosttest.Kinds(t, w.Store)[hostlog.KindClockAccept]; n != 1 {
		t.Fatalf("%d clock-accept records, want 1", n)
	}
}
