package host

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// routeListeners is the running host's forward listeners: one for each
// active route, on its selected revision's forward socket, admitting its
// controller's uid. Serve opens them at start and closes them at shutdown
// (settle, closeAll); a route change through the admin socket prepares
// the listener it will need before its record is appended and settles
// the set after it is applied (the store's operator.Listeners), so that activating,
// deactivating, removing or registering a route takes effect at once.
//
// A closed listener leaves its open channels open: the controller holds
// them between calls, and each dispatch on one checks that its route is
// still active and still served there (operator.Store.Dispatch), so a dispatch
// for a deactivated route is refused before anything is journaled.
type routeListeners struct {
	h     *Host
	ctx   context.Context // the serving context: accept loops end with it
	loops sync.WaitGroup  // the accept loops, which closeAll's caller waits for

	// mu guards the fields that follow. It is taken alone or before the
	// store's lock (listen reads a controller's peer from the store), never
	// under it: the store calls PrepareRoute and SettleRoutes holding none.
	mu       sync.Mutex
	open     map[string]*routeListener
	prepared map[string]*routeListener // opened for a change not yet applied
	closed   bool
}

// routeListener is one forward listener: the route it serves and the
// socket and controller of the revision it was opened for.
type routeListener struct {
	l   *wire.Listener
	cfg wire.ChannelConfig // the handshake of its channels
	operator.ForwardSocket
}

func newRouteListeners(ctx context.Context, h *Host) *routeListeners {
	return &routeListeners{h: h, ctx: ctx, open: map[string]*routeListener{}, prepared: map[string]*routeListener{}}
}

// wanted is what the store says the host listens on: the active routes
// of every controller (operator.Store.ActiveRoutes), by route name.
func (ls *routeListeners) wanted() (map[string]msg.RouteRecord, []string) {
	want := map[string]msg.RouteRecord{}
	var order []string
	for _, rec := range ls.h.s.ActiveRoutes() {
		want[rec.Route] = rec
		order = append(order, rec.Route)
	}
	return want, order
}

// prepare opens the listener revision rv will need once a change is
// applied, unless one serving it is open already or its socket is another
// listener's (settle then closes that one first and opens rv's).
func (ls *routeListeners) prepare(rv msg.RouteRecord) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return fmt.Errorf("the host is shutting down")
	}
	if rl := ls.open[rv.Route]; rl != nil && rl.Serves(rv) {
		return nil
	}
	for _, rl := range ls.open {
		if rl.Forward == rv.Forward {
			return nil
		}
	}
	rl, err := ls.listen(rv)
	if err != nil {
		return err
	}
	if old := ls.prepared[rv.Route]; old != nil {
		old.l.Close()
	}
	ls.prepared[rv.Route] = rl
	return nil
}

// settle matches the open listeners to the state: it closes those of
// routes no longer active (or whose revision moved to another socket or
// controller) first, then opens and serves those of active routes not
// listened on, using what prepare opened. What it could not open is
// returned, one error each, and logged.
func (ls *routeListeners) settle() error {
	want, order := ls.wanted()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	defer func() {
		for name, rl := range ls.prepared {
			rl.l.Close()
			delete(ls.prepared, name)
		}
	}()
	if ls.closed {
		return nil
	}
	for name, rl := range ls.open {
		if rv, ok := want[name]; !ok || !rl.Serves(rv) {
			rl.l.Close()
			delete(ls.open, name)
			ls.h.log.Info("steward-operator: stopped listening for a route", "route", name, "forward", rl.Forward)
		}
	}
	var errs []error
	for _, name := range order {
		if ls.open[name] != nil {
			continue
		}
		rv := want[name]
		rl := ls.prepared[name]
		if rl != nil && rl.Serves(rv) {
			delete(ls.prepared, name)
		} else {
			var err error
			if rl, err = ls.listen(rv); err != nil {
				ls.h.log.Error("steward-operator: cannot listen for an active route", "route", name, "err", err)
				errs = append(errs, err)
				continue
			}
		}
		ls.open[name] = rl
		ls.serve(rl)
	}
	return errors.Join(errs...)
}

// listen opens revision rv's forward socket (not yet accepting) for its
// controller.
func (ls *routeListeners) listen(rv msg.RouteRecord) (*routeListener, error) {
	ls.h.checkRouteAccount(rv)
	peer, ok := ls.h.s.Peer(rv.Controller)
	if !ok {
		return nil, fmt.Errorf("route %s: no controller %s", rv.Route, rv.Controller)
	}
	l, err := ls.h.listenForController(peer, rv.Forward)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", rv.Route, err)
	}
	return &routeListener{l: l, cfg: ls.h.controllerChannel(peer, rv.Forward, msg.PurposeDispatch),
		ForwardSocket: operator.ForwardSocket{Route: rv.Route, Forward: rv.Forward, Controller: rv.Controller}}, nil
}

// serve starts the accept loop of a listener now open. ls.mu is held.
func (ls *routeListeners) serve(rl *routeListener) {
	ls.loops.Add(1)
	go func() {
		defer ls.loops.Done()
		ls.h.acceptLoop(ls.ctx, rl.l, ls.h.routeHandler(rl.ForwardSocket), rl.cfg, 0)
	}()
	ls.h.log.Info("steward-operator: listening for a route", "route", rl.Route, "forward", rl.Forward)
}

// count is how many routes are listened on.
func (ls *routeListeners) count() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.open)
}

// closeAll closes every listener for good: later changes open none.
func (ls *routeListeners) closeAll() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.closed = true
	for _, m := range []map[string]*routeListener{ls.open, ls.prepared} {
		for name, rl := range m {
			rl.l.Close()
			delete(m, name)
		}
	}
}

// PrepareRoute opens the forward listener route revision rec will need
// once the change under way is applied (operator.Listeners).
func (h *Host) PrepareRoute(rec msg.RouteRecord) error { return h.routes.prepare(rec) }

// SettleRoutes matches the forward listeners to the store's active routes
// (operator.Listeners), then returns once the watching controllers hold
// their new tables (awaitRouteAcks).
func (h *Host) SettleRoutes() error {
	err := h.routes.settle()
	h.awaitRouteAcks()
	return err
}
