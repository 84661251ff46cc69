package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Connection caps of a forward listener.
const (
	maxForwardConns  = 64
	maxForwardPerUID = 16
)

// ServeOptions configure the host daemon.
type ServeOptions struct {
	// Ready is called once the journal is open and every socket is bound
	// (the cmd main passes systemd readiness here).
	Ready func()
	// Watchdog, if set, is called once after Ready with a check that says
	// why the host can no longer serve (its journal failed), or nil: the
	// cmd main feeds systemd's watchdog with it.
	Watchdog func(health func() error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// AdminSocket is where the admin socket is bound; STORE/admin.sock
	// (where DialAdmin looks) when empty. The dev mode keeps its sockets
	// in a short runtime directory, since a socket path is at most 107
	// bytes and its store may be deep under a home directory.
	AdminSocket string
	// Now is the host's wall clock, its only source of wall time (the
	// days that per-day limits count, the times grants are valid at,
	// receipts' and checkpoints' times); time.Now when nil. The host never
	// lets it run backwards: see Store.clock. Tests inject one, since the
	// machine's clock cannot be set back in a test.
	Now func() time.Time
	// ApprovalsSocket, when set, is where the approvals socket is bound
	// for the members of ApproversGroup (approvals_socket.go).
	ApprovalsSocket, ApproversGroup string
	// started, when set (by this package's tests), is given the running
	// host before Ready: tests answer asks on its store as the admin socket
	// would.
	started func(*Host)
}

// Host is the running host daemon over one open Store.
type Host struct {
	s   *Store
	log *slog.Logger
	key *wire.SigningKey // the operator key's Ed25519 half: frames and receipts

	revMu   sync.Mutex
	reverse map[string]*wire.Client // by reverse socket path

	// Every dispatch and settle runs between enter and leave, so that a
	// shutdown waits for them before it closes the journal.
	workMu  sync.Mutex
	closing bool
	work    sync.WaitGroup

	wake chan struct{} // wakes the checkpointer

	adminPath string // the admin socket

	warned sync.Map // keys of the warnings logged once (warnOnce)
}

// Serve runs the host daemon on the store in dir until ctx ends, then shuts
// down cleanly: listeners closed, in-flight calls finished, a last
// checkpoint, the journal closed.
func Serve(ctx context.Context, dir string, opts ServeOptions) error {
	s, err := Open(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s.log = log
	if opts.Now != nil {
		s.now = opts.Now
	}
	h := &Host{s: s, log: log, key: s.key.Ed25519(), reverse: map[string]*wire.Client{}, wake: make(chan struct{}, 1),
		adminPath: opts.AdminSocket}
	if h.adminPath == "" {
		h.adminPath = adminSocketPath(dir)
	}
	s.wake = h.poke
	s.askDecided = h.pushVerdict

	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	routes := newRouteListeners(srvCtx, h)
	if err := routes.settle(); err != nil {
		routes.closeAll()
		return err
	}
	// Set before the admin socket is listened on: every route change it
	// carries takes effect on this set (Store.mutateRoute).
	s.listening = routes
	controls := newControlListeners(srvCtx, h)
	if err := controls.listenAll(); err != nil {
		controls.closeAll()
		routes.closeAll()
		return err
	}
	// Set before the admin socket is listened on too: controller add and
	// controller control take effect on this set (Store.mutateControl).
	s.controls = controls
	al, err := h.listenAdmin()
	if err != nil {
		controls.closeAll()
		routes.closeAll()
		return err
	}
	apl, err := h.listenApprovals(opts.ApprovalsSocket, opts.ApproversGroup)
	if err != nil {
		al.Close()
		controls.closeAll()
		routes.closeAll()
		return err
	}
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		h.acceptLoop(srvCtx, al, h.adminHandler(), h.adminChannelConfig(), adminIdleTimeout)
	}()
	if apl != nil {
		loops.Add(1)
		go func() { defer loops.Done(); h.approvalsLoop(srvCtx, apl) }()
	}
	ckDone := make(chan struct{})
	go func() { defer close(ckDone); h.checkpointLoop(srvCtx) }()
	loops.Add(1)
	go func() { defer loops.Done(); h.expireAsks(srvCtx) }()

	log.Info("steward-operator: serving", "store", dir, "routes", routes.count())
	if opts.started != nil {
		opts.started(h)
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	if opts.Watchdog != nil {
		opts.Watchdog(h.health)
	}
	var failed error
	select {
	case <-ctx.Done():
	case <-h.s.j.Failed():
		// A failed fdatasync (what is on disk is unknown) or a receipt
		// record that was not written (no later receipt may land): exit
		// non-zero, so that systemd restarts the host and it reopens the
		// journal from what is really on disk.
		failed = fmt.Errorf("host journal stopped for good (%s); exiting so that a restart reopens it from disk", h.s.j.Summary().Failure)
		log.Error("steward-operator: " + failed.Error())
	}
	log.Info("steward-operator: shutting down")
	al.Close()
	if apl != nil {
		apl.Close()
	}
	controls.closeAll() // as routes: a controller change under way opens nothing now
	routes.closeAll()   // a route change still under way opens nothing now
	cancel()
	loops.Wait()
	controls.loops.Wait()
	routes.loops.Wait()
	h.workMu.Lock()
	h.closing = true
	h.workMu.Unlock()
	h.work.Wait()
	<-ckDone
	if err := h.checkpoint(); err != nil {
		log.Error("steward-operator: last checkpoint", "err", err)
	}
	h.revMu.Lock()
	for _, c := range h.reverse {
		c.Close()
	}
	h.revMu.Unlock()
	return failed
}

// health reports why the host can no longer serve, or nil: a journal
// stopped by a failed fdatasync refuses every later append (and Serve
// exits), so every
// dispatch, settle and administrative change would be refused. It is cheap
// (a copy of the journal's summary) and feeds systemd's watchdog, which
// restarts the daemon when it fails.
func (h *Host) health() error {
	if f := h.s.j.Summary().Failure; f != "" {
		return fmt.Errorf("host journal %s failed: %s", filepath.Join(h.s.dir, journalDir), f)
	}
	return nil
}

// enter registers one unit of work; false when the host is shutting down.
func (h *Host) enter() bool {
	h.workMu.Lock()
	defer h.workMu.Unlock()
	if h.closing {
		return false
	}
	h.work.Add(1)
	return true
}

func (h *Host) leave() { h.work.Done() }

func (h *Host) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *Host) listenRoute(rt msg.RouteRecord) (*wire.Listener, error) {
	h.s.mu.Lock()
	c, ok := h.s.st.controllers[rt.Controller]
	h.s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("route %s: no controller %s", rt.Route, rt.Controller)
	}
	l, err := h.listenForController(c, rt.Forward)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", rt.Route, err)
	}
	return l, nil
}

// listenForController binds path as a socket only controller c dials: a
// route's forward socket or c's control socket. Mode 0660, the peer's
// SO_PEERCRED uid c's, the forward caps and a signed refusal frame past
// them.
func (h *Host) listenForController(c *controller, path string) (*wire.Listener, error) {
	uid, name := c.uid, c.name
	return wire.Listen(wire.ListenConfig{
		Path: path, Mode: 0o660,
		Allow: func(pc wire.PeerCred) error {
			if pc.UID != uid {
				return fmt.Errorf("%w: peer uid %d is not controller %s's uid %d", wire.ErrWrongPeer, pc.UID, name, uid)
			}
			return nil
		},
		MaxConns: maxForwardConns, MaxPerUID: maxForwardPerUID,
		Refuse: wire.RefuseFrame(h.key),
	})
}

func (h *Host) routeChannelConfig(rt msg.RouteRecord) wire.ChannelConfig {
	h.s.mu.Lock()
	c := h.s.st.controllers[rt.Controller]
	h.s.mu.Unlock()
	return h.controllerChannel(c, rt.Forward, msg.PurposeDispatch)
}

// controllerChannel is the handshake of a socket controller c dials with
// its tool key (listenForController), for purpose.
func (h *Host) controllerChannel(c *controller, path, purpose string) wire.ChannelConfig {
	return wire.ChannelConfig{
		Key: h.key, Role: msg.RoleHost, PeerRole: msg.RoleControllerTool, PeerKeys: c.toolRing,
		Path: path, Purpose: purpose,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
}

// acceptLoop accepts admitted connections until the listener closes. A
// connection that completes its handshake is marked proven (the admin
// socket evicts only those that have not); idle, when not 0, bounds the
// quiet between its requests (wire.ServeIdle). A forward channel has no
// such bound: the controller keeps it open between calls.
func (h *Host) acceptLoop(ctx context.Context, l *wire.Listener, hd wire.Handler, cfg wire.ChannelConfig, idle time.Duration) {
	h.acceptLoopWith(ctx, l, hd, idle, func(pc *wire.PeerConn) (*wire.Channel, error) {
		return wire.ServerHandshake(pc, cfg)
	})
}

// acceptLoopWith is acceptLoop with the handshake each connection goes
// through before it is proven: the approvals socket's trades keys first.
func (h *Host) acceptLoopWith(ctx context.Context, l *wire.Listener, hd wire.Handler, idle time.Duration, handshake func(*wire.PeerConn) (*wire.Channel, error)) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		pc, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				h.log.Error("steward-operator: accept", "socket", l.Path(), "err", err)
			}
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer pc.Close()
			ch, err := handshake(pc)
			if err != nil {
				h.log.Warn("steward-operator: handshake refused", "socket", l.Path(), "uid", pc.Cred.UID, "err", err)
				return
			}
			pc.Proven()
			err = wire.ServeIdle(withPeer(ctx, pc.Cred), ch, hd, idle)
			if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				h.log.Info("steward-operator: closed a channel idle past its bound", "socket", l.Path(), "uid", pc.Cred.UID, "idle", idle)
				return
			}
			if err != nil && ctx.Err() == nil && !isEOF(err) {
				h.log.Warn("steward-operator: channel closed", "socket", l.Path(), "err", err)
			}
		}()
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed)
}

// inspectUnreadable is the refusal of an inspect whose outcome record the
// host journal could not give back.
const inspectUnreadable = "the host journal could not be read; the attempt's outcome is unknown here until the host is restarted"

// routeHandler answers dispatch, collect, inspect and allowance on the forward
// channels of one listener. A dispatch is served by its route's selected
// revision as it is when the dispatch arrives, and refused (unavailable,
// nothing journaled) once the route is not active or its revision is
// served on another socket or for another controller: the listener may
// be closed while its channels stay open. Inspect and allowance reserve
// nothing and are answered for the listener's controller either way.
func (h *Host) routeHandler(rl *routeListener) wire.Handler {
	ctrl := rl.controller
	return wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		switch req.T {
		case msg.TypeDispatch:
			var d msg.Dispatch
			if err := req.Decode(&d); err != nil {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "dispatch: " + err.Error()}
			}
			if !h.enter() {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host is shutting down"}
			}
			defer h.leave()
			rt, why := h.s.routeToServe(rl)
			if why != "" {
				return msg.TypeDispatchResult, refused(&d, msg.CodeUnavailable, "%s", why)
			}
			return msg.TypeDispatchResult, h.dispatch(ctx, &rt, &d)
		case msg.TypeCollect:
			var col msg.Collect
			if err := req.Decode(&col); err != nil {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "collect: " + err.Error()}
			}
			if !h.enter() {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host is shutting down"}
			}
			defer h.leave()
			return msg.TypeDispatchResult, h.collect(ctx, rl, &col)
		case msg.TypeInspect:
			return h.answerInspect(ctrl, req)
		case msg.TypeAllowance:
			return h.answerAllowance(ctrl, req)
		default:
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: fmt.Sprintf("unknown request type %q on a forward socket", req.T)}
		}
	})
}

// reverseClient returns the channel to a route's reverse socket, dialling
// it when there is none or the last one failed.
func (h *Host) reverseClient(ctx context.Context, rt *msg.RouteRecord, c *controller) (*wire.Client, error) {
	h.revMu.Lock()
	defer h.revMu.Unlock()
	if cl := h.reverse[rt.Reverse]; cl != nil {
		select {
		case <-cl.Done():
			delete(h.reverse, rt.Reverse)
		default:
			return cl, nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, time.Duration(rt.Timeouts.ConnectMs)*time.Millisecond)
	defer cancel()
	conn, err := wire.Dial(dctx, rt.Reverse, c.uid, c.uid)
	if err != nil {
		return nil, err
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: h.key, Role: msg.RoleHost, PeerRole: msg.RoleControllerDispatch, PeerKeys: c.dispRing,
		Path: rt.Reverse, Purpose: msg.PurposeCustody,
		SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	cl := wire.NewClient(ch)
	h.reverse[rt.Reverse] = cl
	return cl, nil
}

// routeToServe is the revision a dispatch on listener rl's channel is
// served by, or why it is refused: the route is not active, or its
// selected revision is served on another socket or for another controller
// (the controller redials it from the route's record).
func (s *Store) routeToServe(rl *routeListener) (msg.RouteRecord, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if why := s.st.notActiveReason(rl.route); why != "" {
		return msg.RouteRecord{}, why
	}
	sel := s.st.routes[rl.route].selected()
	if !rl.serves(sel) {
		return msg.RouteRecord{}, fmt.Sprintf("route %s is now served by its revision %d on another socket; nothing was reserved or sent", rl.route, sel.rec.Revision)
	}
	return sel.rec, ""
}

// adminSocketPath is the admin socket of a store.
func adminSocketPath(dir string) string { return filepath.Join(dir, adminSocket) }
