package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// controlListeners is the running host's control sockets (control.go):
// one for each controller that has one, admitting that controller's uid.
// Serve opens them at start and closes them at shutdown (listenAll,
// closeAll); `controller add` and `controller control` through the admin
// socket open the socket they name before the record is appended and put
// it in the set after it is applied (the store's operator.Listeners), so that a new
// controller's control socket, or a controller's new one, is answered at
// once. A moved control socket's old listener is closed only once the new
// one is serving.
//
// A closed listener leaves its open channels open, as a route's does:
// they are the same controller's (its uid and tool key) and are answered
// for it alone, whatever socket they came in on.
type controlListeners struct {
	h     *Host
	ctx   context.Context // the serving context: accept loops end with it
	loops sync.WaitGroup  // the accept loops, which closeAll's caller waits for

	// mu guards the fields that follow, taken alone: prepare binds a
	// socket under it and reads nothing of the store.
	mu     sync.Mutex
	open   map[string]*controlListener // by controller
	closed bool
}

// controlListener is one bound control socket and the controller it
// serves.
type controlListener struct {
	controller string
	path       string
	l          *wire.Listener
	cfg        wire.ChannelConfig
}

func newControlListeners(ctx context.Context, h *Host) *controlListeners {
	return &controlListeners{h: h, ctx: ctx, open: map[string]*controlListener{}}
}

// listenAll binds and serves the control socket of every controller that
// has one, at the host's start. A controller added by an older
// controller-add record has none until `steward-operator controller
// control`. The first socket that cannot be bound fails the start; what
// was bound before it stays in the set for closeAll.
func (cs *controlListeners) listenAll() error {
	for _, p := range cs.h.s.ControlSockets() {
		cl, err := cs.prepare(p.Peer, p.Path)
		if err != nil {
			return fmt.Errorf("controller %s: control socket: %w", p.Name, err)
		}
		cs.commit(cl)
	}
	return nil
}

// prepare binds path as controller peer's control socket, not yet
// accepting: nil when its socket is listened on at path already.
func (cs *controlListeners) prepare(peer operator.Peer, path string) (*controlListener, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, fmt.Errorf("the host is shutting down")
	}
	if cl := cs.open[peer.Name]; cl != nil && cl.path == path {
		return nil, nil
	}
	l, err := cs.h.listenForController(peer, path)
	if err != nil {
		return nil, err
	}
	return &controlListener{controller: peer.Name, path: path, l: l, cfg: cs.h.controllerChannel(peer, path, msg.PurposeControl)}, nil
}

// commit serves a prepared listener (nil: nothing to do) as its
// controller's control socket, then closes the one it replaces.
func (cs *controlListeners) commit(cl *controlListener) {
	if cl == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		cl.l.Close()
		return
	}
	cs.loops.Add(1)
	go func() {
		defer cs.loops.Done()
		cs.h.acceptLoop(cs.ctx, cl.l, cs.h.controlHandler(cl.controller), cl.cfg, 0)
	}()
	cs.h.log.Info("steward-operator: listening on a controller's control socket", "controller", cl.controller, "control", cl.path)
	old := cs.open[cl.controller]
	cs.open[cl.controller] = cl
	if old != nil {
		old.l.Close()
		cs.h.log.Info("steward-operator: stopped listening on a controller's old control socket", "controller", old.controller, "control", old.path)
	}
}

// discard closes a prepared listener whose change was not journaled.
func (cs *controlListeners) discard(cl *controlListener) {
	if cl != nil {
		cl.l.Close()
	}
}

// closeAll closes every listener for good: later changes open none.
func (cs *controlListeners) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for name, cl := range cs.open {
		cl.l.Close()
		delete(cs.open, name)
	}
}

// PrepareControl binds path as controller peer's control socket, to be
// served once the change under way is applied (operator.Listeners).
func (h *Host) PrepareControl(peer operator.Peer, path string) (operator.ControlChange, error) {
	cl, err := h.controls.prepare(peer, path)
	if err != nil {
		return nil, err
	}
	return controlChange{cs: h.controls, cl: cl}, nil
}

// controlChange is a prepared control socket (nil: nothing to do).
type controlChange struct {
	cs *controlListeners
	cl *controlListener
}

// Commit serves it and closes the socket it replaces.
func (c controlChange) Commit() { c.cs.commit(c.cl) }

// Discard closes it: the change was not journaled.
func (c controlChange) Discard() { c.cs.discard(c.cl) }
