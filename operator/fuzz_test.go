package operator

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// FuzzControllerKeys: the keys file comes from the controller's account.
func FuzzControllerKeys(f *testing.F) {
	f.Add(newPeer(f, "c").keysFile())
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := newState()
		c, err := st.checkControllerAdd(recControllerAddV2{Name: "c", UID: 1, Keys: b, Control: "/run/c.sock"})
		if err == nil && (c.tool == nil || c.dispatch == nil) {
			t.Fatal("accepted keys without a tool or dispatch key")
		}
	})
}

// FuzzFilterList: a listing comes from the application's account; a page
// filtered by a grant must keep only covered operations, or be refused.
func FuzzFilterList(f *testing.F) {
	f.Add([]byte(`{"operations":[{"id":"calc.evaluate"},{"id":"text.sha256"}],"next_offset":null,"limits":{"request_bytes":65536}}`))
	f.Add([]byte(`{"operations":[{"id":1}]}`))
	f.Add([]byte(`[]`))
	g := &msg.Grant{Application: "app", Operations: []string{"calc.*"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, kept, err := filterPage(b, listFilter{g: g})
		if err != nil {
			return
		}
		for _, op := range kept {
			var id struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(op, &id); err != nil {
				t.Fatalf("kept operation does not parse: %v", err)
			}
			if !g.Covers("app", id.ID) {
				t.Fatalf("uncovered operation %q kept", id.ID)
			}
		}
	})
}

// FuzzReceiptsFile: an exported receipts file may come from anyone.
func FuzzReceiptsFile(f *testing.F) {
	f.Add([]byte{0xa3, 0x67, 'h', 'o', 's', 't', 'K', 'e', 'y', 0x40, 0x68, 'r', 'e', 'c', 'e', 'i', 'p', 't', 's', 0x80, 0x6b, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't', 's', 0x80})
	// The verifier's own keys: a file never supplies them.
	host, err := wire.GenerateHybridKey()
	if err != nil {
		f.Fatal(err)
	}
	disp, err := wire.GenerateSigningKey()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		VerifyReceiptsFileKeys(b, FileKeys{Host: host.Public(), Dispatch: disp.Public()})
	})
}

// FuzzRouteRequest: REQUEST.json.
func FuzzRouteRequest(f *testing.F) {
	f.Add([]byte(`{"controller":"c","upstream":"/a","forward":"/b","reverse":"/c","prefix":"/v1","timeouts":{"connectMs":1,"responseMs":2}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseRouteRequest(b)
	})
}

// routeStateInvariants fails when the store's routes break what every
// route change must keep: a known state, at most one active route an
// application of a controller, at most msg.MaxSelectedRoutes routes not
// removed, and no removed route holding a forward socket.
func routeStateInvariants(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	active := map[[2]string]string{}
	for _, name := range s.st.routeOrder {
		r := s.st.routes[name]
		sel := r.selected().rec
		switch r.state {
		case RouteActive:
			k := [2]string{sel.Controller, sel.Application}
			if other, dup := active[k]; dup {
				t.Fatalf("routes %s and %s are both active for application %s", other, name, sel.Application)
			}
			active[k] = name
		case RouteInactive:
		case RouteRemoved:
			if s.st.forwards[sel.Forward] == name {
				t.Fatalf("removed route %s holds its forward socket", name)
			}
		default:
			t.Fatalf("route %s is in state %q", name, r.state)
		}
	}
	if n := s.st.notRemoved(); n > msg.MaxSelectedRoutes {
		t.Fatalf("%d routes not removed", n)
	}
}

// FuzzAdminRequest: an admin request body as the host decodes it
// (strictly) and, for the route operations, runs it on a store: whatever
// is accepted keeps the route invariants, and a refusal is ErrRefused.
// The admin socket admits only the daemon's own account, and the
// approvals socket an approver's for the approvals operations, which are
// run too.
func FuzzAdminRequest(f *testing.F) {
	dir := shortDir(f)
	store := dir + "/store"
	if _, err := Init(store); err != nil {
		f.Fatal(err)
	}
	s, err := Open(store)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	if _, err := s.AddController("ctl", 1, newPeer(f, "ctl").keysFile(), dir+"/control.sock"); err != nil {
		f.Fatal(err)
	}
	route := func(fwd string) *RouteRequest {
		return &RouteRequest{Controller: "ctl", Upstream: dir + "/app.sock", Forward: dir + "/" + fwd, Reverse: dir + "/rev.sock",
			Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 10, ResponseMs: 10}}
	}
	for _, req := range []AdminRequest{
		{Op: OpRouteRegister, Name: "r1", App: "app", Route: route("f1.sock")},
		{Op: OpRouteRegister, Name: "r2", App: "app", Route: route("f2.sock"), Inactive: true, By: "uid:0"},
		{Op: OpRouteActivate, Name: "r2", By: "uid:0"},
		{Op: OpRouteDeactivate, Name: "r1"},
		{Op: OpRouteRemove, Name: "r1", By: "uid:1000"},
		{Op: OpApprovalsList, Approvals: &ApprovalsRequest{All: true}},
		{Op: OpApprovalsShow, Approvals: &ApprovalsRequest{Ask: "ask-0123456789ab"}},
		{Op: OpApprovalsRespond, Approvals: &ApprovalsRequest{Ask: "ask-0123456789ab", Verdict: msg.VerdictApprove, Note: "ok"}, By: "uid:1000"},
		{Op: OpApprovalsEvents, Approvals: &ApprovalsRequest{After: 1}},
	} {
		b, err := wire.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req AdminRequest
		if wire.Unmarshal(b, &req) != nil {
			return
		}
		switch req.Op {
		case OpRouteRegister, OpRouteActivate, OpRouteDeactivate, OpRouteRemove:
		case OpApprovalsList, OpApprovalsShow, OpApprovalsRespond, OpApprovalsEvents:
			// The approvals socket takes these from an approver's account.
			// An events request's wait is the host's pacing, not input.
			if req.Approvals != nil {
				req.Approvals.WaitMs = 0
			}
		default:
			return
		}
		if _, err := s.Do(req); err != nil && !errors.Is(err, ErrRefused) {
			t.Fatalf("%s: %v (not a refusal)", req.Op, err)
		}
		routeStateInvariants(t, s)
	})
}
