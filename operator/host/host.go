package host

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
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
	// (where admin.Dial looks) when empty. The dev mode keeps its sockets
	// in a short runtime directory, since a socket path is at most 107
	// bytes and its store may be deep under a home directory.
	AdminSocket string
	// Now is the host's wall clock, its only source of wall time (the
	// days that per-day limits count, the times grants are valid at,
	// receipts' and checkpoints' times); time.Now when nil. The host never
	// lets it run backwards (operator.Options.Now). Tests inject one, since the
	// machine's clock cannot be set back in a test.
	Now func() time.Time
	// ApprovalsSocket, when set, is where the approvals socket is bound
	// for the members of ApproversGroup (approvals.go).
	ApprovalsSocket, ApproversGroup string
	// Started, when set, is given the running host before Ready: a test
	// answers asks on its store as the admin socket would.
	Started func(*Host)
	// SnapshotEvery is how many records the host makes a snapshot of its
	// state after (operator.Options.SnapshotEvery); tests make it small.
	SnapshotEvery uint64
	// AskBounds are the operator's caps on pending asks
	// (operator.Options.AskBounds; serve's --pending-asks-* flags).
	AskBounds views.AskBounds
}

// Host is the running host daemon over one open store. It is the store's
// operator.Daemon: its payer (the reverse channels), its listeners (the
// forward and control sockets) and what the store pushes (a receipt to
// checkpoint, a verdict to tell the controller).
type Host struct {
	s   *operator.Store
	log *slog.Logger
	key *wire.SigningKey // the operator key's Ed25519 half: frames

	routes   *routeListeners   // the forward sockets (routes.go)
	controls *controlListeners // the control sockets (controls.go)
	watch    routeWatchers     // the controllers watching their route tables (routewatch.go)

	revMu   sync.Mutex              // guards reverse
	reverse map[string]*wire.Client // by reverse socket path (payer.go)

	// Every dispatch and settle runs between enter and leave, so that a
	// shutdown waits for them before it closes the journal. workMu guards
	// closing.
	workMu  sync.Mutex
	closing bool
	work    sync.WaitGroup

	wake chan struct{} // wakes the checkpointer (timers.go)

	adminPath string // the admin socket

	approvers approverCheck // the approvals socket's group, checked at every request (approvals.go)

	warned sync.Map // keys of the warnings logged once (warnOnce)
}

// Serve runs the host daemon on the store in dir until ctx ends, then shuts
// down cleanly: listeners closed, in-flight calls finished, a last
// checkpoint, the journal closed. It returns an error when the journal
// stopped for good, so that systemd restarts the host.
func Serve(ctx context.Context, dir string, opts ServeOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &Host{log: log, reverse: map[string]*wire.Client{}, wake: make(chan struct{}, 1), adminPath: opts.AdminSocket}
	if h.adminPath == "" {
		h.adminPath = admin.SocketPath(dir)
	}
	h.routes, h.controls = newRouteListeners(srvCtx, h), newControlListeners(srvCtx, h)
	s, err := operator.OpenWith(dir, operator.Options{Now: opts.Now, Logger: log, Daemon: h, SnapshotEvery: opts.SnapshotEvery, AskBounds: opts.AskBounds})
	if err != nil {
		return err
	}
	defer s.Close()
	h.s, h.key = s, s.SigningKey()
	al, apl, err := h.listen(opts)
	if err != nil {
		return err
	}
	var loops sync.WaitGroup
	goLoop := func(loop func()) {
		loops.Add(1)
		go func() { defer loops.Done(); loop() }()
	}
	goLoop(func() { h.acceptLoop(srvCtx, al, h.adminHandler(), h.adminChannelConfig(), adminIdleTimeout) })
	if apl != nil {
		goLoop(func() { h.approvalsLoop(srvCtx, apl) })
	}
	goLoop(func() { h.expireAsks(srvCtx) })
	goLoop(func() {
		// The journal stays the truth when snapshots stop; the host
		// serves on, and says so.
		if err := s.KeepHistory(srvCtx, time.Second); err != nil {
			log.Error("steward-operator: snapshots stopped", "err", err)
		}
	})
	ckDone := make(chan struct{})
	go func() { defer close(ckDone); h.checkpointLoop(srvCtx) }()

	snap, replayed, _ := s.Loaded()
	log.Info("steward-operator: serving", "store", dir, "routes", h.routes.count(), "snapshot", snap, "replayed", replayed)
	if opts.Started != nil {
		opts.Started(h)
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	if opts.Watchdog != nil {
		opts.Watchdog(s.Health)
	}
	failed := h.serveUntil(ctx)
	log.Info("steward-operator: shutting down")
	al.Close()
	if apl != nil {
		apl.Close()
	}
	h.controls.closeAll() // as routes: a controller change under way opens nothing now
	h.routes.closeAll()   // a route change still under way opens nothing now
	cancel()
	loops.Wait()
	h.controls.loops.Wait()
	h.routes.loops.Wait()
	h.drain()
	<-ckDone
	if err := s.Checkpoint(); err != nil {
		log.Error("steward-operator: last checkpoint", "err", err)
	}
	h.closeReverse()
	return failed
}

// Store is the store the host serves.
func (h *Host) Store() *operator.Store { return h.s }

// listen binds every socket the host serves, in the order a change needs
// them (DESIGN.md section 2): the active routes' forward sockets, the
// controllers' control sockets, then the admin socket, which carries the
// changes that the first two sets take at once, and the approvals socket
// when the options name one. A socket that cannot be bound fails the
// start, and what was bound before it is closed.
func (h *Host) listen(opts ServeOptions) (al, apl *wire.Listener, err error) {
	defer func() {
		if err != nil {
			h.controls.closeAll()
			h.routes.closeAll()
		}
	}()
	if err := h.routes.settle(); err != nil {
		return nil, nil, err
	}
	if err := h.controls.listenAll(); err != nil {
		return nil, nil, err
	}
	if al, err = h.listenAdmin(); err != nil {
		return nil, nil, err
	}
	if apl, err = h.listenApprovals(opts.ApprovalsSocket, opts.ApproversGroup); err != nil {
		al.Close()
		return nil, nil, err
	}
	return al, apl, nil
}

// serveUntil waits for ctx to end or for the journal to stop for good. A
// failed fdatasync (what is on disk is unknown) or a receipt record that
// was not written (no later receipt may land) is returned, so that
// systemd restarts the host and it reopens the journal from what is
// really on disk.
func (h *Host) serveUntil(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-h.s.JournalFailed():
		err := fmt.Errorf("host journal stopped for good (%s); exiting so that a restart reopens it from disk", h.s.JournalFailure())
		h.log.Error("steward-operator: " + err.Error())
		return err
	}
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

// drain refuses new work and waits for the work under way.
func (h *Host) drain() {
	h.workMu.Lock()
	h.closing = true
	h.workMu.Unlock()
	h.work.Wait()
}
