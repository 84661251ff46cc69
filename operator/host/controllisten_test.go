package host_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/cli"
)

// TestControllerVerbsWhileServing: through the running host, controller
// add listens on the new controller's control socket at once (it answers
// routes, and a route registered for it later is in the answer), and
// controller control moves it: the new socket answers, the old one is
// gone once the new one is up. The controller's own socket again journals
// nothing; another controller's is refused (exit 2); a socket another
// process listens on fails the command (exit 1) with nothing journaled
// and the old socket still served; so does a controller add on it. A
// restart listens where the journal says.
func TestControllerVerbsWhileServing(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.Serve(t)
	st := w.Store
	c2 := peertest.NewPeer(t, "c2")
	keys := filepath.Join(w.Dir, "c2.pub")
	if err := os.WriteFile(keys, c2.KeysFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	uid := strconv.Itoa(os.Geteuid())
	first, second := filepath.Join(w.Dir, "control-c2.sock"), filepath.Join(w.Dir, "control-c2b.sock")

	n := journalSeq(t, st)
	out := mustRun(t, "controller", "add", "c2", "--uid", uid, "--keys", keys, "--control", first, "--store", st)
	if want := "controller c2: the running host listens on " + first + " now\n"; len(out) < len(want) || out[len(out)-len(want):] != want {
		t.Fatalf("controller add: %q, want it to end %q", out, want)
	}
	if got := journalSeq(t, st); got != n+1 {
		t.Fatalf("controller add journaled %d records, want 1", got-n)
	}
	old := dialControl(t, c2, first, w.Pub)
	if res, ref := askRoutes(t, old, nil); ref != nil || len(res.Active) != 0 {
		t.Fatalf("routes of a controller with none: %+v %+v", res, ref)
	}
	rq := w.Route
	rq.Controller, rq.Forward = "c2", filepath.Join(w.Dir, "fwd-c2.sock")
	w.Route = rq
	mustRun(t, "route", "register", "r2", "app2", routeFile(t, w, "r2", rq.Forward), "--store", st)
	if res, ref := askRoutes(t, old, nil); ref != nil || len(res.Active) != 1 || len(res.Records) != 1 {
		t.Fatalf("routes after registering r2: %+v %+v", res, ref)
	}

	out = mustRun(t, "controller", "control", "c2", "--control", second, "--store", st)
	if want := "controller c2: control socket " + second + "; the running host listens on " + second + " now\n"; out != want {
		t.Fatalf("controller control: %q, want %q", out, want)
	}
	if !dialFails(t, first) {
		t.Fatal("the old control socket still answers")
	}
	if _, err := os.Lstat(first); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old control socket's file: %v", err)
	}
	if res, ref := askRoutes(t, dialControl(t, c2, second, w.Pub), nil); ref != nil || len(res.Active) != 1 {
		t.Fatalf("routes on the new control socket: %+v %+v", res, ref)
	}
	// A channel opened on the old socket stays the controller's.
	if res, ref := askRoutes(t, old, nil); ref != nil || len(res.Active) != 1 {
		t.Fatalf("routes on a channel of the old socket: %+v %+v", res, ref)
	}

	n = journalSeq(t, st)
	if out := mustRun(t, "controller", "control", "c2", "--control", second, "--store", st); out != "controller c2: control socket "+second+" already: nothing journaled\n" {
		t.Fatalf("the same socket again: %q", out)
	}
	wantExit(t, cli.ExitRefused, "refused: controller c2: control socket "+controlPath(w)+" is controller ctl's",
		"controller", "control", "c2", "--control", controlPath(w), "--store", st)
	wantExit(t, cli.ExitRefused, "usage: --control PATH is required", "controller", "control", "c2", "--store", st)

	// A socket another process listens on: the host cannot take it.
	busySocketFails(t, w, keys, second)
	if got := journalSeq(t, st); got != n {
		t.Fatalf("%d records journaled by commands that changed nothing, were refused or failed", got-n)
	}
	s, err := operator.OpenReadOnly(st)
	if err != nil {
		t.Fatal(err)
	}
	cs := s.Controllers()
	s.Close()
	if len(cs) != 2 || cs[1].Name != "c2" || cs[1].Control != second {
		t.Fatalf("controllers: %+v", cs)
	}

	w.Stop()
	w.Serve(t)
	if !dialFails(t, first) {
		t.Fatal("after a restart the old control socket is listened on")
	}
	if res, ref := askRoutes(t, dialControl(t, c2, second, w.Pub), nil); ref != nil || len(res.Active) != 1 {
		t.Fatalf("routes after a restart: %+v %+v", res, ref)
	}
}

// busySocketFails: a socket another process listens on (until the test
// ends) is one the running host cannot take, for controller c2's move
// there (its control socket in use, second, still served) or controller
// c3's add (its keys written to keys); the other process's socket is left
// as it was.
func busySocketFails(t *testing.T, w *hosttest.World, keys, second string) {
	t.Helper()
	st, uid := w.Store, strconv.Itoa(os.Geteuid())
	busy := filepath.Join(w.Dir, "busy.sock")
	ln, err := net.Listen("unix", busy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cannot := "the daemon: controller c2: the host cannot listen on its control socket (wire: listen " + busy + ": another process is listening on it); nothing was journaled"
	wantExit(t, cli.ExitFailure, cannot, "controller", "control", "c2", "--control", busy, "--store", st)
	if dialFails(t, second) {
		t.Fatal("a failed move closed the control socket in use")
	}
	c3 := peertest.NewPeer(t, "c3")
	if err := os.WriteFile(keys, c3.KeysFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	wantExit(t, cli.ExitFailure, "the daemon: controller c3: the host cannot listen on its control socket (wire: listen "+busy+": another process is listening on it); nothing was journaled",
		"controller", "add", "c3", "--uid", uid, "--keys", keys, "--control", busy, "--store", st)
	if c, err := net.Dial("unix", busy); err != nil {
		t.Fatalf("the other process's socket: %v", err)
	} else {
		c.Close()
	}
}

// TestControllerVerbsOnTheStore: with no host the commands journal and
// say the host listens when it starts.
func TestControllerVerbsOnTheStore(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	c2 := peertest.NewPeer(t, "c2")
	keys := filepath.Join(w.Dir, "c2.pub")
	if err := os.WriteFile(keys, c2.KeysFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	first, second := filepath.Join(w.Dir, "control-c2.sock"), filepath.Join(w.Dir, "control-c2b.sock")
	out := mustRun(t, "controller", "add", "c2", "--uid", strconv.Itoa(os.Geteuid()), "--keys", keys, "--control", first, "--store", w.Store)
	if want := "controller c2: the host listens on " + first + " when it starts\n"; len(out) < len(want) || out[len(out)-len(want):] != want {
		t.Fatalf("controller add: %q", out)
	}
	if out := mustRun(t, "controller", "control", "c2", "--control", second, "--store", w.Store); out != "controller c2: control socket "+second+"; the host listens on "+second+" when it starts\n" {
		t.Fatalf("controller control: %q", out)
	}
	w.Serve(t)
	if !dialFails(t, first) {
		t.Fatal("the replaced control socket is listened on")
	}
	if res, ref := askRoutes(t, dialControl(t, c2, second, w.Pub), nil); ref != nil || len(res.Active) != 0 {
		t.Fatalf("routes: %+v %+v", res, ref)
	}
}
