package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// dialControl opens the peer's control channel to the host.
func dialControl(t testing.TB, p *peertest.Peer, path string, host *wire.HybridPublicKey) *wire.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, path, uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: p.Tool, Role: msg.RoleControllerTool, PeerRole: msg.RoleHost, PeerKeys: wire.NewKeyring(host.Ed25519()),
		Path: path, Purpose: msg.PurposeControl, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := wire.NewClient(ch)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// askRoutes sends one routes request and returns the answer, or the
// refusal (typ msg.TypeRefused).
func askRoutes(t testing.TB, cl *wire.Client, known [][]byte) (msg.RoutesResult, *msg.Refusal) {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeRoutes, msg.Routes{Known: known})
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
		t.Fatalf("routes: %s: %v", env.T, err)
	}
	return res, nil
}

func controlPath(w *hosttest.World) string { return filepath.Join(w.Dir, "control.sock") }

// wantRefused fails unless err is a refusal (views.ErrRefused) whose
// text holds part.
func wantRefused(t *testing.T, err error, part string) {
	t.Helper()
	if !errors.Is(err, views.ErrRefused) || !strings.Contains(err.Error(), part) {
		t.Fatalf("want a refusal containing %q, got %v", part, err)
	}
}

// TestControlRoutes: the control socket answers the controller's own
// routes (another controller's never), each record's bytes only when the
// controller does not know it, and refuses Known one past its bound.
func TestControlRoutes(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	other := peertest.NewPeer(t, "c2")
	w.WithStore(t, func(s *operator.Store) {
		if _, err := s.AddController("c2", uint32(os.Geteuid()), other.KeysFile(), filepath.Join(w.Dir, "control-c2.sock")); err != nil {
			t.Fatal(err)
		}
		rq := w.Route
		rq.Controller, rq.Forward = "c2", filepath.Join(w.Dir, "fwd-c2.sock")
		if _, err := s.RegisterRoute("r2", "app", rq); err != nil {
			t.Fatal(err)
		}
	})
	var r1 []byte
	w.WithStore(t, func(s *operator.Store) {
		var err error
		if r1, err = s.SignedRoute("r1"); err != nil {
			t.Fatal(err)
		}
	})
	w.Serve(t)
	cl := dialControl(t, w.Peer, controlPath(w), w.Pub)

	res, ref := askRoutes(t, cl, nil)
	if ref != nil {
		t.Fatalf("routes refused: %+v", ref)
	}
	id := msg.RouteID(r1)
	if len(res.Active) != 1 || !bytes.Equal(res.Active[0], id) || len(res.Records) != 1 || !bytes.Equal(res.Records[0], r1) {
		t.Fatalf("routes of ctl: %d active, %d records; want r1 alone", len(res.Active), len(res.Records))
	}
	rec, err := msg.VerifyRoute(res.Records[0], w.Pub)
	if err != nil || rec.Route != "r1" || rec.Controller != "ctl" {
		t.Fatalf("record: %+v %v", rec, err)
	}

	// Known: the record's bytes are left out; the bound holds exactly.
	known := [][]byte{id}
	for len(known) < msg.MaxKnownRoutes {
		known = append(known, bytes.Repeat([]byte{byte(len(known))}, 32))
	}
	res, ref = askRoutes(t, cl, known)
	if ref != nil || len(res.Active) != 1 || len(res.Records) != 0 {
		t.Fatalf("routes with %d known: %+v %+v", len(known), res, ref)
	}
	_, ref = askRoutes(t, cl, append(known, []byte("one more")))
	want := fmt.Sprintf("routes: %d known route ids, the bound is %d", msg.MaxKnownRoutes+1, msg.MaxKnownRoutes)
	if ref == nil || ref.Code != msg.CodeBadRequest || ref.Reason != want {
		t.Fatalf("one past the bound: %+v, want %s %q", ref, msg.CodeBadRequest, want)
	}

	// The other controller sees its own route only, on its own socket.
	ocl := dialControl(t, other, filepath.Join(w.Dir, "control-c2.sock"), w.Pub)
	res, ref = askRoutes(t, ocl, nil)
	if ref != nil || len(res.Records) != 1 {
		t.Fatalf("routes of c2: %+v %+v", res, ref)
	}
	if rec, _ := msg.VerifyRoute(res.Records[0], w.Pub); rec.Route != "r2" || bytes.Equal(res.Active[0], id) {
		t.Fatalf("c2 was offered %s", rec.Route)
	}

	// Inspect and allowance are answered on the control channel too.
	if in := peertest.Inspect(t, cl, "never-sent"); in.State != msg.StateNotSeen {
		t.Fatalf("inspect: %+v", in)
	}
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeAllowance, msg.Allowance{Agent: "a1"})
	var al msg.AllowanceResult
	if err != nil || env.T != msg.TypeAllowanceResult || env.Decode(&al) != nil || al.Agent != "a1" || al.Limited {
		t.Fatalf("allowance: %v %v %+v", env, err, al)
	}
	env, err = cl.Call(ctx, msg.TypeDispatch, peertest.ListDispatch(t, "x1"))
	var r msg.Refusal
	if err != nil || env.T != msg.TypeRefused || env.Decode(&r) != nil || r.Reason != `unknown request type "dispatch" on a control socket` {
		t.Fatalf("dispatch on the control socket: %v %+v", err, r)
	}
	// The socket is the forward socket's mode.
	if st, err := os.Stat(controlPath(w)); err != nil || st.Mode().Perm() != 0o660 {
		t.Fatalf("control socket mode: %v %v", st.Mode(), err)
	}
}

// TestControlWrongUIDPeer: a peer whose uid is not the controller's is
// refused on the control socket with a signed frame that says so.
func TestControlWrongUIDPeer(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	w.Serve(t)
	uid, out := dialAsOtherAccount(t, w, controlPath(w))
	if !strings.Contains(out, "refused") || !strings.Contains(out, fmt.Sprintf("peer uid %d is not controller ctl's uid 0", uid)) {
		t.Fatalf("helper output: %s", out)
	}
}

// TestControllerControlCommand: a new controller needs --control; one
// added by an older controller-add record has none, so bundle build
// refuses it naming `controller control`, which journals one.
func TestControllerControlCommand(t *testing.T) {
	dir := peertest.ShortDir(t)
	store := filepath.Join(dir, "store")
	if code, _, errs := hosttest.RunCLI("init", "--store", store); code != 0 {
		t.Fatal(errs)
	}
	p := peertest.NewPeer(t, "ctl")
	keys := filepath.Join(dir, "controller.pub")
	if err := os.WriteFile(keys, p.KeysFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hosttest.RunCLI("controller", "add", "ctl", "--uid", "0", "--keys", keys, "--store", store)
	if code != cli.ExitRefused || strings.TrimSpace(errs) != "steward-operator controller add: usage: --uid UID, --keys FILE and --control PATH are required" {
		t.Fatalf("add without --control: %d %q", code, errs)
	}
	// A controller pinned before the control socket: its record as the
	// older commands wrote it.
	s, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	pub := s.PublicKey()
	s.Close()
	hosttest.Append(t, store, pub, hostlog.KindControllerAdd, hostlog.ControllerAdd{Name: "ctl", UID: 0, Keys: p.KeysFile()})
	bundle := filepath.Join(dir, "bundle.cbor")
	code, _, errs = hosttest.RunCLI("bundle", "build", "ctl", "--out", bundle, "--store", store)
	want := "steward-operator bundle build: refused: controller ctl has no control socket: set it with `steward-operator controller control ctl --control PATH --store DIR`, then build the bundle"
	if code != cli.ExitRefused || strings.TrimSpace(errs) != want {
		t.Fatalf("bundle of a controller without a control socket: %d %q\nwant %q", code, errs, want)
	}
	code, _, errs = hosttest.RunCLI("controller", "control", "ctl", "--control", "run/control.sock", "--store", store)
	if code != cli.ExitRefused || !strings.Contains(errs, `control socket "run/control.sock" must be a clean absolute path`) {
		t.Fatalf("relative control socket: %d %q", code, errs)
	}
	control := "/run/steward/host/control-ctl.sock"
	if code, _, errs := hosttest.RunCLI("controller", "control", "ctl", "--control", control, "--store", store); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := hosttest.RunCLI("bundle", "build", "ctl", "--out", bundle, "--store", store); code != 0 {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile(bundle)
	if got, _, _, err := msg.OpenBundle(b); err != nil || got.Control != control {
		t.Fatalf("bundle control %q %v", got.Control, err)
	}
	// Replay keeps it, and a second controller cannot take the same socket.
	s, err = operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cs := s.Controllers(); len(cs) != 1 || cs[0].Control != control {
		t.Fatalf("after replay: %+v", cs)
	}
	_, err = s.AddController("c2", 0, peertest.NewPeer(t, "c2").KeysFile(), control)
	wantRefused(t, err, "control socket "+control+" is controller ctl's")
}
