package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// controlHost is the host's side of a control socket for the unit tests
// that need a route table but no whole host (package operator's is the
// one the stack tests run): a real socket, SO_PEERCRED, the handshake
// with the controller's tool key and PurposeControl, answering routes
// from the signed records it is given, as the host's control.go does.
type controlHost struct {
	key     *wire.HybridSigningKey
	path    string
	lookups atomic.Int64
	mu      sync.Mutex
	routes  [][]byte // signed, in the host's order
	known   [][]byte // the Known of the last lookup
}

// newControlHost listens on a control socket in dir for a controller whose
// tool key is tool.
func newControlHost(t testing.TB, dir string, tool *wire.SigningKey) *controlHost {
	t.Helper()
	key, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	h := &controlHost{key: key, path: filepath.Join(dir, "control.sock")}
	l, err := wire.Listen(wire.ListenConfig{Path: h.path, Mode: 0o600, Allow: func(wire.PeerCred) error { return nil },
		Refuse: wire.RefuseFrame(key.Ed25519())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var conns sync.WaitGroup
	t.Cleanup(func() { cancel(); l.Close(); conns.Wait() })
	cfg := wire.ChannelConfig{Key: key.Ed25519(), Role: msg.RoleHost, PeerRole: msg.RoleControllerTool, PeerKeys: wire.NewKeyring(tool.Public()),
		Path: h.path, Purpose: msg.PurposeControl, SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame}
	go func() {
		for {
			pc, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer pc.Close()
				ch, err := wire.ServerHandshake(pc, cfg)
				if err != nil {
					return
				}
				pc.Proven()
				wire.Serve(ctx, ch, wire.HandlerFunc(h.answer))
			}()
		}
	}()
	return h
}

func (h *controlHost) answer(_ context.Context, req *wire.Envelope) (string, any) {
	if req.T != msg.TypeRoutes {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "not here"}
	}
	var q msg.Routes
	if err := req.Decode(&q); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: err.Error()}
	}
	h.lookups.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known = q.Known
	res := msg.RoutesResult{Active: [][]byte{}}
	for _, s := range h.routes {
		id := msg.RouteID(s)
		res.Active = append(res.Active, id)
		if !containsID(q.Known, id) {
			res.Records = append(res.Records, s)
		}
	}
	return msg.TypeRoutesResult, res
}

func containsID(ids [][]byte, id []byte) bool {
	for _, k := range ids {
		if bytes.Equal(k, id) {
			return true
		}
	}
	return false
}

// route signs a route record of app for controller ctl with the host's
// key (or with key, when set).
func (h *controlHost) route(t testing.TB, name, app, ctl string, edit func(r *msg.RouteRecord)) []byte {
	t.Helper()
	r := msg.RouteRecord{Route: name, Revision: 1, Application: app, Protocol: msg.ProtocolOracleOperationsV1, Controller: ctl,
		Upstream: "/nonexistent/" + app + ".sock", Forward: filepath.Join(filepath.Dir(h.path), name+".fwd"),
		Reverse: filepath.Join(filepath.Dir(h.path), "reverse.sock"), Prefix: "/v1",
		Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 5000}, IssuedAt: time.Now().UnixMilli()}
	key := h.key
	if edit != nil {
		edit(&r)
	}
	s, err := msg.SignRoute(key, r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *controlHost) set(routes ...[]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.routes = routes
}

func (h *controlHost) lastKnown() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.known
}

// tableController is a controller named dev with no journal, bound to a
// control host in a short temp dir that offers one route of appliance:
// planning a call asks it.
func tableController(t testing.TB, log *slog.Logger) (*Controller, *controlHost) {
	t.Helper()
	dir, err := os.MkdirTemp("", "stwl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tool, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	h := newControlHost(t, dir, tool)
	h.set(h.route(t, "r", "appliance", "dev", nil))
	if log == nil {
		log = slog.Default()
	}
	bind := &Binding{Bundle: msg.Bundle{Controller: "dev", HostUID: uint32(os.Geteuid()), Control: h.path},
		HostKey: h.key.Public(), HostRing: wire.NewKeyring(h.key.Public().Ed25519())}
	c := &Controller{cfg: &Config{Name: "dev"}, led: ledger.New(), log: log, bind: bind, keys: &Keys{Tool: tool}, routes: newRouteTable()}
	c.ctl = newControl(c)
	t.Cleanup(func() { c.routes.closeAll(); c.ctl.close() })
	return c, h
}

// TestLiveRoutesChecked: the table offers the host's active routes that
// this controller may use, sorted by application; each record is sent
// and checked once (the next lookup names it Known and gets no bytes);
// a record of another controller, another protocol, a bad prefix or
// another key is left out, and an application's second route, each
// logged once; a route the host stops offering leaves the table.
func TestLiveRoutesChecked(t *testing.T) {
	var logBuf syncBuffer
	c, h := tableController(t, slog.New(slog.NewTextHandler(&logBuf, nil)))
	other, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	zeta := h.route(t, "r-zeta", "zeta", "dev", nil)
	alpha := h.route(t, "r-alpha", "alpha", "dev", nil)
	foreign := h.route(t, "r-foreign", "foreign", "someone-else", nil)
	v2 := h.route(t, "r-v2", "v2app", "dev", func(r *msg.RouteRecord) { r.Protocol = "oracle-operations-v2" })
	badPrefix := h.route(t, "r-bad", "bad", "dev", func(r *msg.RouteRecord) { r.Prefix = "v1/" })
	forged, err := msg.SignRoute(other, msg.RouteRecord{Route: "r-forged", Revision: 1, Application: "forged", Protocol: msg.ProtocolOracleOperationsV1,
		Controller: "dev", Forward: "/f", Upstream: "/u", Reverse: "/r", Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 1, ResponseMs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	alpha2 := h.route(t, "r-alpha2", "alpha", "dev", nil)
	h.set(zeta, foreign, v2, alpha, badPrefix, forged, alpha2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		routes, err := c.liveRoutes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes) != 2 || routes[0].Route != "r-alpha" || routes[1].Application != "zeta" {
			t.Fatalf("lookup %d: %+v, want r-alpha (the first of alpha's in the host's order) and zeta", i, routes)
		}
		if i > 0 && len(h.lastKnown()) != 7 {
			t.Fatalf("lookup %d named %d records Known, want all 7 it was sent", i, len(h.lastKnown()))
		}
	}
	logs := logBuf.String()
	for _, why := range []string{`it is controller \"someone-else\"'s`, `it speaks \"oracle-operations-v2\"`, "prefix", "does not verify with the bundle's host key",
		"the host offers a second route for an application"} {
		if n := strings.Count(logs, why); n != 1 {
			t.Errorf("%q logged %d times over 3 lookups, want once:\n%s", why, n, logs)
		}
	}
	// The host stops offering zeta: it leaves the table, and its record
	// leaves the Known set.
	h.set(alpha)
	routes, err := c.liveRoutes(ctx)
	if err != nil || len(routes) != 1 || routes[0].Application != "alpha" {
		t.Fatalf("after zeta left: %+v %v", routes, err)
	}
	if _, err := c.routeOf(ctx, "zeta"); err == nil || !errors.Is(err, ErrArguments) ||
		!strings.Contains(err.Error(), `application: "zeta" is not an application of this controller (steward_overview lists them)`) {
		t.Fatalf("zeta after it left: %v", err)
	}
	if _, err := c.liveRoutes(ctx); err != nil || len(h.lastKnown()) != 1 {
		t.Fatalf("known after zeta left: %d, %v", len(h.lastKnown()), err)
	}
}

// TestForwardClosedAfterItsLastUse: a forward channel whose route left the
// table stays open while a dispatch uses it and is closed when that use
// ends; a route still offered keeps its channel.
func TestForwardClosedAfterItsLastUse(t *testing.T) {
	c, h := tableController(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.routeOf(ctx, "appliance")
	if err != nil {
		t.Fatal(err)
	}
	f, release := c.useForward(r)
	h.set() // the operator deactivated it while the dispatch runs
	if routes, err := c.liveRoutes(ctx); err != nil || len(routes) != 0 {
		t.Fatalf("table: %+v %v", routes, err)
	}
	c.routes.mu.Lock()
	held, retired := c.routes.fwd[keyOf(r)] == f, f.retired
	c.routes.mu.Unlock()
	if !held || !retired {
		t.Fatalf("under its dispatch: held %v retired %v, want the channel kept, retired", held, retired)
	}
	release()
	c.routes.mu.Lock()
	_, still := c.routes.fwd[keyOf(r)]
	c.routes.mu.Unlock()
	if still {
		t.Fatal("the retired channel outlived its last dispatch")
	}
	// An offered route's channel is kept after its use.
	h.set(h.route(t, "r", "appliance", "dev", nil))
	if r, err = c.routeOf(ctx, "appliance"); err != nil {
		t.Fatal(err)
	}
	_, release = c.useForward(r)
	release()
	c.routes.mu.Lock()
	_, kept := c.routes.fwd[keyOf(r)]
	c.routes.mu.Unlock()
	if !kept {
		t.Fatal("an offered route's channel was closed after its use")
	}
}

// TestLiveRoutesUnreachable: a host whose control socket does not answer
// refuses the call unavailable, with the exact reason.
func TestLiveRoutesUnreachable(t *testing.T) {
	c, _ := tableController(t, nil)
	c.bind.Bundle.Control = filepath.Join(t.TempDir(), "nobody.sock")
	c.ctl = newControl(c)
	raw, _ := json.Marshal(callArgs("r1", map[string]any{"text": "x"}))
	_, err := c.plan(context.Background(), ToolCall, raw, "uid:1")
	r := planRefusal(err)
	if r.Refusal == nil || r.Refusal.Code != msg.CodeUnavailable || r.Refusal.Reason != routesUnavailable ||
		routesUnavailable != "the host cannot be reached to look up its applications now; nothing was journaled or sent" {
		t.Fatalf("refusal %+v", r.Refusal)
	}
}

// syncBuffer is a log sink safe for the handlers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
