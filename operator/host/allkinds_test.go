package host_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

var updateAllKinds = flag.Bool("update-allkinds", false, "rewrite operator/testdata/allkinds from this run of the host")

// firstVersions are the record kinds only hosts before their second
// version wrote: the golden v1 journal holds them (journal/testdata/golden).
var firstVersions = map[string]bool{
	hostlog.KindControllerAdd: true, hostlog.KindRouteRegister: true, hostlog.KindReserve: true,
	hostlog.KindNotSent: true, hostlog.KindOutcome: true,
}

// TestAllKindsJournal: the host's own operations, run once each way a
// record is written, leave a journal that holds every record kind a host
// writes now; with -update-allkinds it becomes operator/testdata/allkinds,
// the journal the core's snapshot tests replay at every mark
// (TestSnapshotAtEveryMark), so that a kind added without its place in a
// snapshot fails there.
func TestAllKindsJournal(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 1000, Price: 5, RefusalPrice: 1, NoApp: true, SegmentSize: 1 << 20})
	clk := peertest.NewClock(time.Now().Add(time.Minute))
	w.Now = clk.Now
	hangUp := hangUpApp(t, w.Route.Upstream)
	w.Serve(t)
	allKindsWindows(t, w, clk)
	cl := w.Dial(t)
	everyOutcome(t, w, cl, hangUp)

	adm := openAdmin(t, w.Store)
	defer adm.Close()
	do := adminDo(t, adm)
	allKindsApprovals(t, w, clk, do)
	allKindsNotSent(t, w, clk, do)
	do(admin.Request{Op: admin.OpControllerControl, Name: "ctl", Control: filepath.Join(w.Dir, "control-2.sock")})
	do(admin.Request{Op: admin.OpPurseFreeze, Name: "ctl"})
	do(admin.Request{Op: admin.OpPurseThaw, Name: "ctl"})
	clk.Set(time.Now()) // behind the times the test's clock ran ahead to
	do(admin.Request{Op: admin.OpClockAccept})
	w.Stop()

	kinds := hosttest.Kinds(t, w.Store)
	for _, k := range hostlog.KindNames() {
		if kinds[k] == 0 && !firstVersions[k] {
			t.Errorf("the journal holds no %s record", k)
		}
	}
	if *updateAllKinds {
		writeAllKinds(t, w.Store, filepath.Join("..", "testdata", "allkinds"))
	}
}

// everyOutcome makes, on served world w whose application hangUp hangs
// up, an attempt of each way a call ends: two uncertain (sent, never
// answered: one released, one redelivered to a new application), an
// answer, a describe and a refused consent.
func everyOutcome(t *testing.T, w *hosttest.World, cl *wire.Client, hangUp func()) {
	t.Helper()
	for _, id := range []string{"u1", "u2"} { // uncertain: sent, never answered
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"6*7"}`)); res.Outcome != msg.StateUncertain {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	hangUp()
	w.App = peertest.StartApp(t, w.Dir)
	resolveJSON(t, w.Store, "u1", "release", "the application never saw it")
	resolveJSON(t, w.Store, "u2", "redeliver", "the application is back")
	hosttest.WantAnswer(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "d1", "calc.evaluate", `{"expression":"1+1"}`)))
	if res := peertest.Call(t, cl, peertest.DescribeDispatch(t, "d2", "calc.evaluate")); res.Outcome != msg.StateDefinite {
		t.Fatalf("d2: %+v", res)
	}
	w.Peer.RefuseReserve.Store(true)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "p1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoConsent, "")
	w.Peer.RefuseReserve.Store(false)
}

// adminDo is a func running one admin request on adm, failing t on an
// error.
func adminDo(t *testing.T, adm admin.Client) func(admin.Request) {
	return func(req admin.Request) {
		t.Helper()
		if _, err := adm.Do(req); err != nil {
			t.Fatalf("%s: %v", req.Op, err)
		}
	}
}

// allKindsApprovals marks alice's calc.* for approval (agent-limits),
// raises an ask answered by a human and collected (ask, ask-answer, the
// reservation and outcome), and one left to expire to its deny (ask,
// ask-expired, refused).
func allKindsApprovals(t *testing.T, w *hosttest.World, clk *peertest.Clock, do func(admin.Request)) {
	t.Helper()
	do(admin.Request{Op: admin.OpAgentSet, Agent: &views.AgentSpec{Controller: "ctl", Agent: "alice", Approval: hosttest.HumansOnly()}})
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	cl := w.Dial(t)
	tk := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	if _, err := w.HostStore().AnswerAsk(tk.ID, hosttest.Human(msg.VerdictApprove, 1001, "ann")); err != nil {
		t.Fatal(err)
	}
	hosttest.WantAnswer(t, hosttest.CollectCall(t, cl, "a1"))
	hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	clk.Add(msg.DefaultApprovalExpiry + time.Minute)
	peertest.WantRefusal(t, hosttest.CollectCall(t, cl, "a2"), msg.CodeDenied, "expired")
}

// allKindsNotSent registers a second route (route-register.v2) to an
// application nothing serves, grants it (grant-issue), calls it
// (not-sent.v2), deactivates and activates it (route-state) and revokes
// its grant (grant-revoke).
func allKindsNotSent(t *testing.T, w *hosttest.World, clk *peertest.Clock, do func(admin.Request)) {
	t.Helper()
	req := w.Route
	req.Upstream, req.Forward = filepath.Join(w.Dir, "nothing.sock"), filepath.Join(w.Dir, "fwd-2.sock")
	do(admin.Request{Op: admin.OpRouteRegister, Name: "r2", App: "app2", Route: &req})
	do(admin.Request{Op: admin.OpGrantIssue, Grant: &admin.Grant{Controller: "ctl", Application: "app2", Price: 5, PerDay: 10,
		NotAfter: clk.Now().Add(time.Hour).UnixMilli()}})
	cl := w.Peer.Dial(t, req.Forward, w.Pub)
	if res := peertest.Call(t, cl, hosttest.WithAgent(peertest.InvokeDispatch(t, "n1", "calc.evaluate", `{"expression":"1+1"}`), "alice")); res.Outcome != msg.StateNotSent {
		t.Fatalf("n1: %+v", res)
	}
	do(admin.Request{Op: admin.OpRouteDeactivate, Name: "r2"})
	do(admin.Request{Op: admin.OpRouteActivate, Name: "r2"})
	for _, g := range w.HostStore().Grants() {
		if g.Application == "app2" {
			do(admin.Request{Op: admin.OpGrantRevoke, Name: g.ID})
		}
	}
}

// writeAllKinds writes the stopped store's public key and journal to dir,
// each segment cut to its records (the journal preallocates again what a
// copied segment lacks), as the golden journals are.
func writeAllKinds(t *testing.T, store, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, hostlog.JournalDir), 0o700); err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(store, hostlog.PubFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, hostlog.PubFile), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := journal.Inspect(filepath.Join(store, hostlog.JournalDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range sum.Segments {
		b, err := os.ReadFile(filepath.Join(store, hostlog.JournalDir, seg.Name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, hostlog.JournalDir, seg.Name), b[:seg.Used], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
