package host_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

func watchRoutes(t testing.TB, cl *wire.Client, q msg.RoutesWatch) (msg.RoutesResult, *msg.Refusal) {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeRoutesWatch, q)
	if err != nil {
		t.Fatal(err)
	}
	if env.T == msg.TypeRefused {
		var r msg.Refusal
		if err := env.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return msg.RoutesResult{}, &r
	}
	var res msg.RoutesResult
	if err := env.Decode(&res); err != nil {
		t.Fatalf("routes-watch: %s: %v", env.T, err)
	}
	return res, nil
}

// TestControlRoutesWatch: a watch naming another table than the host's is
// answered at once; one naming the host's table is held until a route
// change, which returns only once the watcher has named the new table;
// Known and Active one past their bounds are refused with the exact error.
func TestControlRoutesWatch(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	w.Serve(t)
	cl := dialControl(t, w.Peer, controlPath(w), w.Pub)

	res, ref := watchRoutes(t, cl, msg.RoutesWatch{})
	if ref != nil || len(res.Active) != 1 || len(res.Records) != 1 {
		t.Fatalf("first watch: %+v %+v, want the one route at once", res, ref)
	}
	id := res.Active[0]

	// Held until the route is deactivated; the deactivation returns only
	// once a watch names the table without it.
	held := make(chan msg.RoutesResult, 1)
	go func() {
		r, _ := watchRoutes(t, cl, msg.RoutesWatch{Known: [][]byte{id}, Active: [][]byte{id}})
		held <- r
	}()
	changed := make(chan error, 1)
	go func() {
		_, _, err := w.HostStore().SetRouteState("r1", hostlog.RouteInactive, "")
		changed <- err
	}()
	r := <-held
	if len(r.Active) != 0 {
		t.Fatalf("held watch answered %d active routes after the deactivation, want 0", len(r.Active))
	}
	select {
	case err := <-changed:
		t.Fatalf("the route change returned (%v) before the watcher named its new table", err)
	default:
	}
	ack := make(chan msg.RoutesResult, 1)
	go func() {
		r, _ := watchRoutes(t, cl, msg.RoutesWatch{Known: [][]byte{id}})
		ack <- r
	}()
	if err := <-changed; err != nil {
		t.Fatal(err)
	}
	// The acknowledging watch is held now; the activation answers it.
	if _, _, err := w.HostStore().SetRouteState("r1", hostlog.RouteActive, ""); err != nil {
		t.Fatal(err)
	}
	if r := <-ack; len(r.Active) != 1 || !bytes.Equal(r.Active[0], id) || len(r.Records) != 0 {
		t.Fatalf("watch after the activation: %+v", r)
	}

	known := make([][]byte, msg.MaxKnownRoutes+1)
	for i := range known {
		known[i] = bytes.Repeat([]byte{byte(i)}, 32)
	}
	_, ref = watchRoutes(t, cl, msg.RoutesWatch{Known: known})
	want := fmt.Sprintf("routes-watch: %d known route ids, the bound is %d", msg.MaxKnownRoutes+1, msg.MaxKnownRoutes)
	if ref == nil || ref.Code != msg.CodeBadRequest || ref.Reason != want {
		t.Fatalf("Known one past the bound: %+v, want %q", ref, want)
	}
	_, ref = watchRoutes(t, cl, msg.RoutesWatch{Active: known[:msg.MaxSelectedRoutes+1]})
	want = fmt.Sprintf("routes-watch: %d active route ids, the bound is %d", msg.MaxSelectedRoutes+1, msg.MaxSelectedRoutes)
	if ref == nil || ref.Code != msg.CodeBadRequest || ref.Reason != want {
		t.Fatalf("Active one past the bound: %+v, want %q", ref, want)
	}
}
