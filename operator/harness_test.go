package operator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stewardrt/steward/appliance"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// shortDir makes a temp dir with a short path: socket paths must fit 108 bytes.
func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "op")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// testApp is the reference application (package appliance) on a Unix
// socket, behind a counting front so that tests can check that refused
// dispatches reach nothing: the front serves app.sock with the appliance's
// own handler (the appliance's socket is unused).
type testApp struct {
	sock  string
	calls atomic.Int64
	srv   *http.Server
}

func startApp(t testing.TB, dir string) *testApp {
	a := &testApp{sock: filepath.Join(dir, "app.sock")}
	inner, err := appliance.Start(appliance.Config{Socket: filepath.Join(dir, "app-inner.sock"), State: filepath.Join(dir, "appstate"),
		Capacity: 64, JournalSegmentSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	l, err := net.Listen("unix", a.sock)
	if err != nil {
		t.Fatal(err)
	}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		inner.ServeHTTP(w, r)
	})}
	go a.srv.Serve(l)
	t.Cleanup(func() { a.srv.Close() })
	return a
}

// peer is the controller side of the tests: its keys, its reverse socket
// (answering reserve with a consent signed by its dispatch key, or by a
// forger's key) and its forward client.
type peer struct {
	name                  string
	ctrl, tool, disp, prv *wire.SigningKey
	forger                *wire.SigningKey
	forge                 atomic.Bool
	refuseReserve         atomic.Bool
	beforeConsent         atomic.Pointer[func()] // runs before a consent is answered
	principal             atomic.Pointer[string] // the consent's principal when set; else uid:1000
	reserves              atomic.Int64
	verdicts              chan msg.VerdictPush // the verdicts the host pushed (approvals)
	mu                    sync.Mutex
	revPath               string
	revL                  *wire.Listener
}

func newPeer(t testing.TB, name string) *peer {
	p := &peer{name: name, verdicts: make(chan msg.VerdictPush, 64)}
	for _, k := range []**wire.SigningKey{&p.ctrl, &p.tool, &p.disp, &p.prv, &p.forger} {
		var err error
		if *k, err = wire.GenerateSigningKey(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *peer) keysFile() []byte {
	b, err := wire.Marshal(msg.ControllerKeys{
		Controller: p.ctrl.Public().MarshalCOSEKey(), Tool: p.tool.Public().MarshalCOSEKey(),
		Dispatch: p.disp.Public().MarshalCOSEKey(), Provider: p.prv.Public().MarshalCOSEKey(),
	})
	if err != nil {
		panic(err)
	}
	return b
}

// listenReverse serves the reverse socket for the host whose public key is host.
func (p *peer) listenReverse(t testing.TB, path string, host *wire.HybridPublicKey) {
	p.revPath = path
	l, err := wire.Listen(wire.ListenConfig{
		Path: path, Mode: 0o600, Allow: func(wire.PeerCred) error { return nil },
		Refuse: wire.RefuseFrame(p.disp),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.revL = l
	t.Cleanup(func() { l.Close() })
	cfg := wire.ChannelConfig{
		Key: p.disp, Role: msg.RoleControllerDispatch, PeerRole: msg.RoleHost, PeerKeys: wire.NewKeyring(host.Ed25519()),
		Path: path, Purpose: msg.PurposeCustody, SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
	go func() {
		for {
			pc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer pc.Close()
				ch, err := wire.ServerHandshake(pc, cfg)
				if err != nil {
					return
				}
				wire.Serve(context.Background(), ch, wire.HandlerFunc(p.serveReverse))
			}()
		}
	}()
}

func (p *peer) serveReverse(ctx context.Context, req *wire.Envelope) (string, any) {
	switch req.T {
	case msg.TypeReserve:
		p.reserves.Add(1)
		var r msg.Reserve
		if err := req.Decode(&r); err != nil {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: err.Error()}
		}
		if p.refuseReserve.Load() {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeNoConsent, Reason: "not journaled"}
		}
		key := p.disp
		if p.forge.Load() {
			key = p.forger
		}
		principal := "uid:1000"
		if pr := p.principal.Load(); pr != nil {
			principal = *pr
		}
		c, err := msg.SignConsent(key, msg.Consent{V: msg.CustodyV2, Attempt: r.Attempt, Controller: r.Controller,
			Principal: principal, Application: r.Application, Operation: r.Operation, RequestSHA256: r.RequestSHA256,
			GrantSHA256: msg.GrantHash(r.Grant), Charge: r.Charge, RefusalPrice: r.RefusalPrice, At: time.Now().UnixMilli()})
		if err != nil {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: err.Error()}
		}
		if f := p.beforeConsent.Load(); f != nil {
			(*f)()
		}
		return msg.TypeConsent, msg.ConsentReply{Consent: c}
	case msg.TypeVerdict:
		var v msg.VerdictPush
		if err := req.Decode(&v); err != nil {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: err.Error()}
		}
		select {
		case p.verdicts <- v:
		default:
		}
		return msg.TypeVerdictAck, struct{}{}
	}
	return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "unknown " + req.T}
}

// dial opens a forward channel to the host's route socket.
func (p *peer) dial(t testing.TB, fwd string, host *wire.HybridPublicKey) *wire.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, fwd, uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: p.tool, Role: msg.RoleControllerTool, PeerRole: msg.RoleHost, PeerKeys: wire.NewKeyring(host.Ed25519()),
		Path: fwd, Purpose: msg.PurposeDispatch, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := wire.NewClient(ch)
	t.Cleanup(func() { cl.Close() })
	return cl
}

func invokeDispatch(t testing.TB, attempt, op, args string) msg.Dispatch {
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(args), ConversationID: "c1", OperationID: op, RequestID: "r-" + attempt})
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path, Body: req.Body}
}

func listDispatch(t testing.TB, attempt string) msg.Dispatch {
	req, err := oracleops.BuildList("/v1", oracleops.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path}
}

func describeDispatch(t testing.TB, attempt, op string) msg.Dispatch {
	req, err := oracleops.BuildDescribe("/v1", op)
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path}
}

func call(t testing.TB, cl *wire.Client, d msg.Dispatch) msg.DispatchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeDispatch, d)
	if err != nil {
		t.Fatalf("dispatch %s: %v", d.Attempt, err)
	}
	if env.T == msg.TypeRefused {
		var r msg.Refusal
		env.Decode(&r)
		return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateRefused, Refusal: &r}
	}
	var res msg.DispatchResult
	if err := env.Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func inspect(t testing.TB, cl *wire.Client, id string) msg.InspectResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeInspect, msg.Inspect{Attempt: id})
	if err != nil {
		t.Fatal(err)
	}
	var res msg.InspectResult
	if err := env.Decode(&res); err != nil {
		t.Fatalf("inspect %s: %s: %v", id, env.T, err)
	}
	return res
}

// world is a store with one controller, a funded purse, a grant and a route,
// an application and the controller's peer.
type world struct {
	dir, store string
	app        *testApp
	peer       *peer
	pub        *wire.HybridPublicKey
	route      RouteRequest
	grant      string
	stop       func()           // stops the in-process host
	now        func() time.Time // the host's wall clock when set (ServeOptions.Now)
	log        *slog.Logger     // the host's logger when set (ServeOptions.Logger)
	host       *Host            // the in-process host while it serves
	// approvals and approvers are the approvals socket and its group
	// when set (ServeOptions.ApprovalsSocket, ApproversGroup).
	approvals, approvers string
}

type worldOpts struct {
	fund           uint64
	price, dprice  uint64
	refusalPrice   uint64
	perDay         uint64
	ops            []string
	noGrant, noApp bool
	storeIn        string // the store's parent directory (a small tmpfs, say); the world's dir when empty
	segmentSize    int64  // the host journal's segment size; the journal's default when 0
}

func newWorld(t testing.TB, o worldOpts) *world {
	w := &world{dir: shortDir(t)}
	w.store = filepath.Join(w.dir, "store")
	if o.storeIn != "" {
		w.store = filepath.Join(o.storeIn, "store")
	}
	pub, err := InitWith(w.store, InitOptions{JournalSegmentSize: o.segmentSize})
	if err != nil {
		t.Fatal(err)
	}
	w.pub = pub
	if !o.noApp {
		w.app = startApp(t, w.dir)
	}
	w.peer = newPeer(t, "ctl")
	w.peer.listenReverse(t, filepath.Join(w.dir, "rev.sock"), pub)
	s, err := Open(w.store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddController("ctl", uint32(os.Geteuid()), w.peer.keysFile(), filepath.Join(w.dir, "control.sock")); err != nil {
		t.Fatal(err)
	}
	if o.fund > 0 {
		if _, err := s.FundPurse("ctl", o.fund); err != nil {
			t.Fatal(err)
		}
	}
	if o.perDay == 0 {
		o.perDay = 1000
	}
	if !o.noGrant {
		g, err := s.IssueGrant(GrantSpec{Controller: "ctl", Application: "app", Operations: o.ops, Price: o.price,
			DiscoveryPrice: o.dprice, RefusalPrice: o.refusalPrice, PerDay: o.perDay, NotAfter: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		w.grant = g.ID
	}
	w.route = RouteRequest{Controller: "ctl", Upstream: filepath.Join(w.dir, "app.sock"), Forward: filepath.Join(w.dir, "fwd.sock"),
		Reverse: filepath.Join(w.dir, "rev.sock"), Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 5000}}
	if _, err := s.RegisterRoute("r1", "app", w.route); err != nil {
		t.Fatal(err)
	}
	return w
}

// serve runs the host in-process until stop is called.
func (w *world) serve(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	opts := ServeOptions{Ready: func() { close(ready) }, Now: w.now, Logger: w.log, started: func(h *Host) { w.host = h },
		ApprovalsSocket: w.approvals, ApproversGroup: w.approvers}
	if _, bench := t.(*testing.B); bench {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) // keep benchmark output parseable
	}
	go func() { done <- Serve(ctx, w.store, opts) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("serve: not ready within 20s")
	}
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(w.stop)
}

func (w *world) dial(t testing.TB) *wire.Client { return w.peer.dial(t, w.route.Forward, w.pub) }

// withStore opens the (stopped) store for a check.
func (w *world) withStore(t testing.TB, fn func(s *Store)) {
	t.Helper()
	s, err := Open(w.store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fn(s)
}

func wantRefusal(t testing.TB, res msg.DispatchResult, code, reasonPart string) {
	t.Helper()
	if res.Outcome != msg.StateRefused || res.Refusal == nil {
		t.Fatalf("want refusal %s, got outcome %s status %d %s (%s)", code, res.Outcome, res.Status, res.Body, res.Detail)
	}
	if res.Refusal.Code != code || !strings.Contains(res.Refusal.Reason, reasonPart) {
		t.Fatalf("want refusal %s containing %q, got %s: %s", code, reasonPart, res.Refusal.Code, res.Refusal.Reason)
	}
	wantNoInternals(t, res.Refusal.Reason)
}

// wantNoInternals fails when a text that reaches the agent names the
// operator's internals the harness uses: the controller's name (ctl), a
// grant id (g-...), a socket path (under the temp dir) or a time window.
func wantNoInternals(t testing.TB, text string) {
	t.Helper()
	for _, bad := range []string{"ctl", "g-", os.TempDir(), ".sock", "valid "} {
		if strings.Contains(text, bad) {
			t.Fatalf("%q reaches the agent and carries %q", text, bad)
		}
	}
}

var _ = errors.Is

func testCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// requestSHA256 is the hash the controller journals for d's request.
func requestSHA256(d msg.Dispatch) []byte {
	sum := oracleops.Request{Method: d.Method, Path: d.Path, Body: d.Body}.SHA256()
	return sum[:]
}
