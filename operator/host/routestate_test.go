package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// routeFile writes a REQUEST.json for a route of the world's controller
// on forward socket fwd and returns its path.
func routeFile(t *testing.T, w *hosttest.World, name, fwd string) string {
	t.Helper()
	req := w.Route
	req.Forward = fwd
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(w.Dir, name+".json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustRun runs a command line that must exit 0 and returns its stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := hosttest.RunCLI(args...)
	if code != cli.ExitOK {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	return out
}

// wantExit runs a command line that must exit code with stderr equal to
// "steward-operator CMD: " + line.
func wantExit(t *testing.T, code int, line string, args ...string) {
	t.Helper()
	got, _, errs := hosttest.RunCLI(args...)
	want := "steward-operator " + args[0] + " " + args[1] + ": " + line + "\n"
	if got != code || errs != want {
		t.Fatalf("%v: exit %d, stderr %q; want exit %d, %q", args, got, errs, code, want)
	}
}

// journalSeq counts the records of the store's host journal, read
// without its lock (the host may be running), but for checkpoints: the
// running host's checkpointer appends those on its own after an outcome.
func journalSeq(t *testing.T, store string) uint64 {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var n uint64
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != hostlog.KindCheckpoint {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lastRouteRecords decodes the route-state and route-register.v2 records
// of the store's journal, in journal order.
func routeRecords(t *testing.T, store string) []any {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var out []any
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != hostlog.KindRouteState && r.Kind != hostlog.KindRouteRegisterV2 {
			return nil
		}
		rec, err := hostlog.Decode(r)
		if err != nil {
			return err
		}
		out = append(out, rec.Body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// routeStates are the states `route list --json` shows, by route.
func routeStates(t *testing.T, store string) map[string]views.RouteView {
	t.Helper()
	var rs []views.RouteView
	if err := json.Unmarshal([]byte(mustRun(t, "route", "list", "--store", store, "--json")), &rs); err != nil {
		t.Fatal(err)
	}
	m := map[string]views.RouteView{}
	for _, r := range rs {
		m[r.Route] = r
	}
	return m
}

// lastSeq is the sequence number of the last record of the store's host
// journal, read without its lock (the store may be open).
func lastSeq(t *testing.T, store string) uint64 {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	return j.LastSeq()
}

var me = fmt.Sprintf("uid:%d", os.Geteuid())

// TestRouteVerbsOnTheStore: with no host, each verb journals one record
// naming the store's account and the time, a repeated activation or
// deactivation journals nothing, removal is final, and a reopened store
// replays every state.
func TestRouteVerbsOnTheStore(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	st := w.Store
	if out := mustRun(t, "route", "deactivate", "r1", "--store", st); !strings.HasPrefix(out, "route r1 deactivated by "+me+" at ") {
		t.Fatalf("deactivate: %q", out)
	}
	n := journalSeq(t, st)
	if out := mustRun(t, "route", "deactivate", "r1", "--store", st); out != "route r1 is inactive already: nothing journaled\n" {
		t.Fatalf("second deactivate: %q", out)
	}
	if got := journalSeq(t, st); got != n {
		t.Fatalf("a repeated deactivation journaled %d records", got-n)
	}
	mustRun(t, "route", "activate", "r1", "--store", st)
	if out := mustRun(t, "route", "register", "r2", "app2", routeFile(t, w, "r2", w.Dir+"/f2.sock"), "--inactive", "--store", st); !strings.HasSuffix(out, "\nroute r2 is inactive: not listened on until steward-operator route activate r2\n") {
		t.Fatalf("register --inactive: %q", out)
	}
	mustRun(t, "route", "remove", "r2", "--store", st)

	recs := routeRecords(t, st)[1:] // the world's registration of r1 first
	if len(recs) != 4 {
		t.Fatalf("%d route records: %+v", len(recs), recs)
	}
	for i, want := range []struct {
		kind  string
		state hostlog.RouteState
	}{{hostlog.KindRouteState, hostlog.RouteInactive}, {hostlog.KindRouteState, hostlog.RouteActive}, {hostlog.KindRouteRegisterV2, hostlog.RouteInactive}, {hostlog.KindRouteState, hostlog.RouteRemoved}} {
		var state hostlog.RouteState
		var by string
		var at int64
		switch b := recs[i].(type) {
		case *hostlog.RouteStateChange:
			state, by, at = b.State, b.By, b.At
			if want.kind != hostlog.KindRouteState {
				t.Fatalf("record %d is a state change, want %s", i, want.kind)
			}
		case *hostlog.RouteRegisterV2:
			state, by, at = b.State, b.By, b.At
			if want.kind != hostlog.KindRouteRegisterV2 {
				t.Fatalf("record %d is a registration, want %s", i, want.kind)
			}
		}
		if state != want.state || by != me || at <= 0 {
			t.Fatalf("record %d: state %s by %q at %d; want %s by %s", i, state, by, at, want.state, me)
		}
	}
	// removal is final
	wantExit(t, cli.ExitRefused, "refused: route r2 was removed: removal is final and its name stays taken; nothing was changed",
		"route", "activate", "r2", "--store", st)
	wantExit(t, cli.ExitRefused, "refused: route r2 was removed: removal is final and its name stays taken; nothing was changed",
		"route", "remove", "r2", "--store", st)
	wantExit(t, cli.ExitRefused, "refused: route r2 was removed: removal is final and its name stays taken, so it takes no new revision (register the application under another route name)",
		"route", "register", "r2", "app2", routeFile(t, w, "r2", w.Dir+"/f2.sock"), "--store", st)
	wantExit(t, cli.ExitRefused, "refused: no route r3", "route", "deactivate", "r3", "--store", st)
	wantExit(t, cli.ExitRefused, "usage: want 1 arguments, got 0 (route remove ROUTE --store DIR)", "route", "remove", "--store", st)
	// a removed route gives up its forward socket
	mustRun(t, "route", "register", "r3", "app2", routeFile(t, w, "r3", w.Dir+"/f2.sock"), "--store", st)
	if got := journalSeq(t, st); got != n+4 {
		t.Fatalf("journal at %d, want %d: refusals journaled", got, n+4)
	}
	// replay keeps every state; list and show print it
	rs := routeStates(t, st)
	if rs["r1"].State != hostlog.RouteActive || rs["r2"].State != hostlog.RouteRemoved || rs["r3"].State != hostlog.RouteActive || rs["r2"].StateBy != me {
		t.Fatalf("states after replay: %+v", rs)
	}
	if out := mustRun(t, "route", "show", "r2", "--store", st); !strings.HasPrefix(out, "revision 1 ") || !strings.Contains(out, "\nroute r2: removed (by "+me+" at ") {
		t.Fatalf("route show: %q", out)
	}
	if out := mustRun(t, "route", "list", "--store", st); !strings.Contains(out, "r1\tactive (by "+me) {
		t.Fatalf("route list: %q", out)
	}
}

// TestOneActiveRoutePerApplication: a second active route for one
// application of one controller is refused, registered or activated,
// naming the first; an inactive one may wait beside it.
func TestOneActiveRoutePerApplication(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.WithStore(t, func(s *operator.Store) {
		rr := w.Route
		rr.Forward = w.Dir + "/f2.sock"
		n := lastSeq(t, w.Store)
		_, err := s.RegisterRoute("r2", "app", rr)
		wantRefused(t, err, "route r2: application app of controller ctl already has active route r1 (at most one active route an application): deactivate r1 first, or register this one --inactive")
		if got := lastSeq(t, w.Store); got != n {
			t.Fatal("a refused registration was journaled")
		}
		if _, err := s.RegisterRouteAs("r2", "app", rr, views.RouteRegistration{Inactive: true}); err != nil {
			t.Fatal(err)
		}
		n = lastSeq(t, w.Store)
		_, _, err = s.SetRouteState("r2", hostlog.RouteActive, "")
		wantRefused(t, err, "route r2: application app of controller ctl already has active route r1 (at most one active route an application): deactivate r1 first")
		if got := lastSeq(t, w.Store); got != n {
			t.Fatal("a refused activation was journaled")
		}
		// a new revision of an active route may not take another's application
		r3 := w.Route
		r3.Forward = w.Dir + "/f3.sock"
		v3, err := s.RegisterRoute("r3", "app3", r3)
		if err != nil {
			t.Fatal(err)
		}
		r3.Replaces = v3.ID
		_, err = s.RegisterRoute("r3", "app", r3)
		wantRefused(t, err, "route r3: application app of controller ctl already has active route r1")
		// nor be asked inactive: a new revision keeps the state
		_, err = s.RegisterRouteAs("r3", "app3", r3, views.RouteRegistration{Inactive: true})
		wantRefused(t, err, "route r3 is active and a new revision keeps its state: deactivate it first (steward-operator route deactivate r3)")
		if _, _, err := s.SetRouteState("r1", hostlog.RouteInactive, ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetRouteState("r2", hostlog.RouteActive, ""); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.SetRouteState("r1", hostlog.RouteActive, "")
		wantRefused(t, err, "already has active route r2")
	})
	w.WithStore(t, func(s *operator.Store) {
		var names []string
		for _, rec := range s.ActiveRoutes() {
			if rec.Controller == "ctl" {
				names = append(names, rec.Route)
			}
		}
		if strings.Join(names, ",") != "r2,r3" {
			t.Fatalf("active routes after replay: %v", names)
		}
		if got := s.RouteTable("other", nil); len(got.Active) != 0 || len(got.Records) != 0 {
			t.Fatalf("another controller's active routes: %v", got)
		}
	})
}

// TestRouteBoundCountsRoutesNotRemoved: msg.MaxSelectedRoutes routes that
// are not removed fit, one more is refused (inactive ones count), and
// after a removal it fits.
func TestRouteBoundCountsRoutesNotRemoved(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.WithStore(t, func(s *operator.Store) {
		reg := func(i int) error {
			rr := w.Route
			rr.Forward = fmt.Sprintf("%s/f%d.sock", w.Dir, i)
			_, err := s.RegisterRouteAs(fmt.Sprintf("r%d", i), fmt.Sprintf("app%d", i), rr, views.RouteRegistration{Inactive: i%2 == 0})
			return err
		}
		for i := 2; i <= msg.MaxSelectedRoutes; i++ {
			if err := reg(i); err != nil {
				t.Fatalf("route %d: %v", i, err)
			}
		}
		n := lastSeq(t, w.Store)
		wantRefused(t, reg(msg.MaxSelectedRoutes+1), "route r9: 8 routes are registered and not removed, the bound is 8: remove one first (steward-operator route remove)")
		if got := lastSeq(t, w.Store); got != n {
			t.Fatal("a refused registration was journaled")
		}
		if _, _, err := s.SetRouteState("r4", hostlog.RouteRemoved, ""); err != nil {
			t.Fatal(err)
		}
		if err := reg(msg.MaxSelectedRoutes + 1); err != nil {
			t.Fatalf("route 9 after a removal: %v", err)
		}
		wantRefused(t, reg(msg.MaxSelectedRoutes+2), "route r10: 8 routes are registered and not removed, the bound is 8")
	})
	w.WithStore(t, func(s *operator.Store) {
		if n := len(s.Routes()); n != msg.MaxSelectedRoutes+1 {
			t.Fatalf("%d routes after replay, want %d (one removed)", n, msg.MaxSelectedRoutes+1)
		}
	})
}

// dialFails reports whether dialling the socket at path fails (nobody
// listens there).
func dialFails(t *testing.T, path string) bool {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	uid := uint32(os.Geteuid())
	c, err := wire.Dial(ctx, path, uid, uid)
	if err == nil {
		c.Close()
		return false
	}
	return true
}

// TestRouteVerbsWhileServing: through the running host each verb takes
// effect at once and names the admin peer: a deactivated route's socket
// is gone and a dispatch on a channel opened before is refused with
// nothing journaled, charged or sent; activated, it is listened on again;
// registered inactive, it is not listened on; removed, its open channel
// is refused too; a new revision on another socket moves the listener.
// A restart keeps every state.
func TestRouteVerbsWhileServing(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 3})
	w.Serve(t)
	st, fwd := w.Store, w.Route.Forward
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("first call: %+v", res)
	}

	if out := mustRun(t, "route", "deactivate", "r1", "--store", st); !strings.HasPrefix(out, "route r1 deactivated by "+me+" at ") {
		t.Fatalf("deactivate: %q", out)
	}
	if !dialFails(t, fwd) {
		t.Fatal("the deactivated route's forward socket still answers")
	}
	n, calls := journalSeq(t, st), w.App.Calls.Load()
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "off1", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateRefused || res.Refusal == nil || res.Refusal.Code != msg.CodeUnavailable ||
		res.Refusal.Reason != "route r1 is not active: the operator deactivated it; nothing was reserved or sent" || res.Receipt != nil {
		t.Fatalf("dispatch on an open channel of a deactivated route: %+v %+v", res, res.Refusal)
	}
	if got := journalSeq(t, st); got != n || w.App.Calls.Load() != calls {
		t.Fatalf("the refused dispatch journaled %d records, sent %d requests", got-n, w.App.Calls.Load()-calls)
	}
	if in := peertest.Inspect(t, cl, "off1"); in.State != msg.StateNotSeen {
		t.Fatalf("the refused attempt is %s", in.State)
	}

	mustRun(t, "route", "activate", "r1", "--store", st)
	if res := peertest.Call(t, w.Dial(t), peertest.InvokeDispatch(t, "ok2", "calc.evaluate", `{"expression":"2+2"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("a call after activation: %+v", res)
	}
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok3", "calc.evaluate", `{"expression":"3+3"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("a call on the channel opened before, once active again: %+v", res)
	}

	f2 := w.Dir + "/f2.sock"
	mustRun(t, "route", "register", "r2", "app2", routeFile(t, w, "r2", f2), "--inactive", "--store", st)
	if !dialFails(t, f2) {
		t.Fatal("a route registered inactive is listened on")
	}
	mustRun(t, "route", "activate", "r2", "--store", st)
	cl2 := w.Peer.Dial(t, f2, w.Pub)
	mustRun(t, "route", "remove", "r2", "--store", st)
	if !dialFails(t, f2) {
		t.Fatal("a removed route's forward socket still answers")
	}
	n = journalSeq(t, st)
	res = peertest.Call(t, cl2, peertest.InvokeDispatch(t, "off2", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Refusal == nil || res.Refusal.Code != msg.CodeUnavailable || res.Refusal.Reason != "route r2 is not active: the operator removed it; nothing was reserved or sent" {
		t.Fatalf("dispatch on an open channel of a removed route: %+v", res)
	}
	if got := journalSeq(t, st); got != n {
		t.Fatal("the refused dispatch was journaled")
	}

	// a new revision on another forward socket: the old one is closed,
	// the new one served, a channel on the old one refused
	f3 := w.Dir + "/f3.sock"
	rv, _ := json.Marshal(w.Route)
	var req views.RouteRequest
	json.Unmarshal(rv, &req)
	req.Forward = f3
	routes := routeStates(t, st)
	req.Replaces = routes["r1"].ID
	b, _ := json.Marshal(req)
	os.WriteFile(w.Dir+"/r1v2.json", b, 0o600)
	mustRun(t, "route", "register", "r1", "app", w.Dir+"/r1v2.json", "--store", st)
	if !dialFails(t, fwd) {
		t.Fatal("revision 1's forward socket still answers")
	}
	if res := peertest.Call(t, w.Peer.Dial(t, f3, w.Pub), peertest.InvokeDispatch(t, "ok4", "calc.evaluate", `{"expression":"4+4"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("a call on revision 2's socket: %+v", res)
	}
	res = peertest.Call(t, cl, peertest.InvokeDispatch(t, "off3", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Refusal == nil || res.Refusal.Code != msg.CodeUnavailable || res.Refusal.Reason != "route r1 is now served by its revision 2 on another socket; nothing was reserved or sent" {
		t.Fatalf("dispatch on revision 1's channel: %+v", res)
	}

	// every change was the admin peer's
	wantRouteRecordsBy(t, st, me)
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		p, _ := s.PurseShow("ctl")
		if p.Charged != 4*3 {
			t.Fatalf("charged %d, want 12: four calls, refusals free", p.Charged)
		}
	})
	w.Serve(t)
	if !dialFails(t, f2) || !dialFails(t, fwd) {
		t.Fatal("after a restart a removed route or a replaced revision is listened on")
	}
	if res := peertest.Call(t, w.Peer.Dial(t, f3, w.Pub), peertest.InvokeDispatch(t, "ok5", "calc.evaluate", `{"expression":"5+5"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("a call after the restart: %+v", res)
	}
}

// wantRouteRecordsBy fails unless every route record of the store's
// journal names by as who made the change.
func wantRouteRecordsBy(t *testing.T, store, by string) {
	t.Helper()
	for i, r := range routeRecords(t, store) {
		var got string
		switch b := r.(type) {
		case *hostlog.RouteStateChange:
			got = b.By
		case *hostlog.RouteRegisterV2:
			got = b.By
		}
		if got != by {
			t.Fatalf("route record %d names %q, want %s", i, got, by)
		}
	}
}

// TestRouteRemoveRefusedWhileUnresolved: an uncertain attempt of the
// route's application keeps it from being removed (the refusal names it
// and the command that resolves it; nothing journaled); once resolved, it
// is removed. An attempt whose route is inactive is not redelivered.
func TestRouteRemoveRefusedWhileUnresolved(t *testing.T) {
	w := uncertainWorld(t, 5)
	n := journalSeq(t, w.Store)
	wantExit(t, cli.ExitRefused, "refused: route r1 has 1 unresolved attempt (u1): resolve each first with steward-operator attempts resolve ID (--redeliver|--release|--charge) --reason TEXT; nothing was removed",
		"route", "remove", "r1", "--store", w.Store)
	if got := journalSeq(t, w.Store); got != n {
		t.Fatal("a refused removal was journaled")
	}
	mustRun(t, "route", "deactivate", "r1", "--store", w.Store)
	wantExit(t, cli.ExitRefused, "refused: attempt u1: no active route delivers to application app for controller ctl: activate its route to redeliver it (steward-operator route activate ROUTE), or release or charge it",
		"attempts", "resolve", "u1", "--redeliver", "--reason", "try again", "--store", w.Store)
	resolveJSON(t, w.Store, "u1", "release", "the application never got it")
	if out := mustRun(t, "route", "remove", "r1", "--store", w.Store); !strings.HasPrefix(out, "route r1 removed by "+me) {
		t.Fatalf("remove: %q", out)
	}
}

// TestRouteActivateUnlistenableFails: an activation whose forward socket
// the running host cannot listen on fails (exit 1) with nothing
// journaled; the route stays inactive.
func TestRouteActivateUnlistenableFails(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	mustRun(t, "route", "register", "r2", "app2", routeFile(t, w, "r2", w.Dir+"/missing/f2.sock"), "--inactive", "--store", w.Store)
	w.Serve(t)
	n := journalSeq(t, w.Store)
	code, _, errs := hosttest.RunCLI("route", "activate", "r2", "--store", w.Store)
	if code != cli.ExitFailure || !strings.Contains(errs, "route r2: the host cannot listen on its forward socket (") || !strings.HasSuffix(errs, "; nothing was journaled\n") {
		t.Fatalf("activate: exit %d: %q", code, errs)
	}
	if got := journalSeq(t, w.Store); got != n {
		t.Fatal("a failed activation was journaled")
	}
	if rs := routeStates(t, w.Store); rs["r2"].State != hostlog.RouteInactive {
		t.Fatalf("r2 is %s", rs["r2"].State)
	}
}

// TestRouteDeactivatedDuringConsent: a route deactivated while a call
// waits for the payer's consent stops the call before anything is
// reserved: refused unavailable, with its receipt, nothing charged.
func TestRouteDeactivatedDuringConsent(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 3})
	w.Serve(t)
	var deactivated error
	f := func() {
		_, _, deactivated = func() (views.RouteView, bool, error) {
			a := openAdmin(t, w.Store)
			defer a.Close()
			rep, err := a.Do(admin.Request{Op: admin.OpRouteDeactivate, Name: "r1"})
			if err != nil {
				return views.RouteView{}, false, err
			}
			return *rep.Route, true, nil
		}()
	}
	w.Peer.BeforeConsent.Store(&f)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "c1", "calc.evaluate", `{"expression":"1+1"}`))
	if deactivated != nil {
		t.Fatal(deactivated)
	}
	peertest.WantRefusal(t, res, msg.CodeUnavailable, "route r1 is not active: the operator deactivated it"+"; the call was admitted, then stopped before it was sent: nothing was sent or charged")
	if res.Receipt == nil || w.App.Calls.Load() != 0 {
		t.Fatalf("receipt %d bytes, %d requests sent", len(res.Receipt), w.App.Calls.Load())
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Charged != 0 {
			t.Fatalf("charged %d", p.Charged)
		}
	})
}

// TestRouteRevisionServedAtOnce: a new revision on the same forward
// socket, registered through the running host, serves the next call on a
// channel opened before it: here one whose upstream nobody listens on (the
// call ends not sent), then one back on the application.
func TestRouteRevisionServedAtOnce(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 3})
	w.Serve(t)
	cl := w.Dial(t)
	register := func(upstream string) {
		t.Helper()
		req := w.Route
		req.Upstream = upstream
		req.Replaces = routeStates(t, w.Store)["r1"].ID
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(w.Dir, "rev.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		mustRun(t, "route", "register", "r1", "app", p, "--store", w.Store)
	}
	register(w.Dir + "/nobody.sock")
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "v2", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateNotSent {
		t.Fatalf("a call under revision 2: %s %s, want not-sent", res.Outcome, res.Detail)
	}
	register(w.Route.Upstream)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "v3", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("a call under revision 3: %+v", res)
	}
	if n := w.App.Calls.Load(); n != 1 {
		t.Fatalf("the application saw %d requests, want 1", n)
	}
}
