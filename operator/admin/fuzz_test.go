package admin_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// routeStateInvariants fails when the store's routes, as its views give
// them (Routes: every route's selected revision, removed ones included),
// break what every route change must keep: a known state, at most one
// active route an application of a controller, at most
// msg.MaxSelectedRoutes routes not removed, and a forward socket of one
// route not removed only (a removed route gives up its socket, which
// refusedForRemoved checks where the store reads who holds one).
func routeStateInvariants(t *testing.T, s *operator.Store) {
	t.Helper()
	active := map[[2]string]string{}
	forwards := map[string]string{} // forward socket -> the route not removed whose selected revision has it
	notRemoved := 0
	for _, sel := range s.Routes() {
		name := sel.Route
		switch sel.State {
		case hostlog.RouteActive:
			k := [2]string{sel.Controller, sel.Application}
			if other, dup := active[k]; dup {
				t.Fatalf("routes %s and %s are both active for application %s", other, name, sel.Application)
			}
			active[k] = name
		case hostlog.RouteInactive:
		case hostlog.RouteRemoved:
			continue
		default:
			t.Fatalf("route %s is in state %q", name, sel.State)
		}
		notRemoved++
		if other, dup := forwards[sel.Forward]; dup {
			t.Fatalf("routes %s and %s both hold forward socket %s", other, name, sel.Forward)
		}
		forwards[sel.Forward] = name
	}
	if n := notRemoved; n > msg.MaxSelectedRoutes {
		t.Fatalf("%d routes not removed", n)
	}
}

// refusedForRemoved fails when the store refused the registration req
// because its forward socket is another route's, and that route, as the
// store's views give it, is removed or has another socket: a removed route
// holds no forward socket, and a route holds only its selected
// revision's. (The store reads who holds a socket only here.)
func refusedForRemoved(t *testing.T, s *operator.Store, req admin.Request, err error) {
	t.Helper()
	if req.Op != admin.OpRouteRegister || req.Route == nil || err == nil {
		return
	}
	held := fmt.Sprintf("%s: route %s: forward socket %s is route ", views.ErrRefused, req.Name, req.Route.Forward)
	holder, ok := strings.CutPrefix(err.Error(), held)
	if !ok {
		return
	}
	holder = strings.TrimSuffix(holder, "'s")
	for _, v := range s.Routes() {
		if v.Route != holder {
			continue
		}
		if v.State == hostlog.RouteRemoved {
			t.Fatalf("removed route %s holds its forward socket", holder)
		}
		if v.Forward != req.Route.Forward {
			t.Fatalf("route %s holds forward socket %s, but its selected revision's is %s", holder, req.Route.Forward, v.Forward)
		}
		return
	}
	t.Fatalf("forward socket %s is held by route %s, which the store does not list", req.Route.Forward, holder)
}

// FuzzAdminRequest: an admin request body as the host decodes it
// (strictly) and, for the route operations, runs it on a store: whatever
// is accepted keeps the route invariants, and a refusal is ErrRefused.
// The admin socket admits only the daemon's own account, and the
// approvals socket an approver's for the approvals operations, which are
// run too.
func FuzzAdminRequest(f *testing.F) {
	dir := peertest.ShortDir(f)
	store := dir + "/store"
	if _, err := operator.Init(store); err != nil {
		f.Fatal(err)
	}
	s, err := operator.Open(store)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	if _, err := s.AddController("ctl", 1, peertest.NewPeer(f, "ctl").KeysFile(), dir+"/control.sock"); err != nil {
		f.Fatal(err)
	}
	route := func(fwd string) *views.RouteRequest {
		return &views.RouteRequest{Controller: "ctl", Upstream: dir + "/app.sock", Forward: dir + "/" + fwd, Reverse: dir + "/rev.sock",
			Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 10, ResponseMs: 10}}
	}
	for _, req := range []admin.Request{
		{Op: admin.OpRouteRegister, Name: "r1", App: "app", Route: route("f1.sock")},
		{Op: admin.OpRouteRegister, Name: "r2", App: "app", Route: route("f2.sock"), Inactive: true, By: "uid:0"},
		{Op: admin.OpRouteActivate, Name: "r2", By: "uid:0"},
		{Op: admin.OpRouteDeactivate, Name: "r1"},
		{Op: admin.OpRouteRemove, Name: "r1", By: "uid:1000"},
		// r1's socket, given up: taken by r3, then refused to r4 as r3's.
		{Op: admin.OpRouteRegister, Name: "r3", App: "app", Route: route("f1.sock"), Inactive: true},
		{Op: admin.OpRouteRegister, Name: "r4", App: "app4", Route: route("f1.sock")},
		{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{All: true}},
		{Op: admin.OpApprovalsShow, Approvals: &admin.ApprovalsRequest{Ask: "ask-0123456789ab"}},
		{Op: admin.OpApprovalsRespond, Approvals: &admin.ApprovalsRequest{Ask: "ask-0123456789ab", Verdict: msg.VerdictApprove, Note: "ok"}, By: "uid:1000"},
		{Op: admin.OpApprovalsEvents, Approvals: &admin.ApprovalsRequest{After: 1}},
	} {
		b, err := wire.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req admin.Request
		if wire.Unmarshal(b, &req) != nil {
			return
		}
		switch req.Op {
		case admin.OpRouteRegister, admin.OpRouteActivate, admin.OpRouteDeactivate, admin.OpRouteRemove:
		case admin.OpApprovalsList, admin.OpApprovalsShow, admin.OpApprovalsRespond, admin.OpApprovalsEvents:
			// The approvals socket takes these from an approver's account.
			// An events request's wait is the host's pacing, not input.
			if req.Approvals != nil {
				req.Approvals.WaitMs = 0
			}
		default:
			return
		}
		_, err := admin.Do(s, req)
		if err != nil && !errors.Is(err, views.ErrRefused) {
			t.Fatalf("%s: %v (not a refusal)", req.Op, err)
		}
		refusedForRemoved(t, s, req, err)
		routeStateInvariants(t, s)
	})
}
