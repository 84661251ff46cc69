package operator

import (
	"context"
	"fmt"
	"sync"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// controlListeners is the running host's control sockets (control.go):
// one for each controller that has one, admitting that controller's uid.
// Serve opens them at start and closes them at shutdown (listenAll,
// closeAll); `controller add` and `controller control` through the admin
// socket open the socket they name before the record is appended and put
// it in the set after it is applied (Store.mutateControl), so that a new
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

	mu     sync.Mutex                  // guards the fields that follow
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
	type pinned struct {
		c    *controller
		path string
	}
	s := cs.h.s
	s.mu.Lock()
	var all []pinned
	for _, n := range s.st.ctrlOrder {
		if c := s.st.controllers[n]; c.control != "" {
			all = append(all, pinned{c: c, path: c.control})
		}
	}
	s.mu.Unlock()
	for _, p := range all {
		cl, err := cs.prepare(p.c, p.path)
		if err != nil {
			return fmt.Errorf("controller %s: control socket: %w", p.c.name, err)
		}
		cs.commit(cl)
	}
	return nil
}

// prepare binds path as controller c's control socket, not yet accepting:
// nil when c's socket is listened on at path already.
func (cs *controlListeners) prepare(c *controller, path string) (*controlListener, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, fmt.Errorf("the host is shutting down")
	}
	if cl := cs.open[c.name]; cl != nil && cl.path == path {
		return nil, nil
	}
	l, err := cs.h.listenForController(c, path)
	if err != nil {
		return nil, err
	}
	return &controlListener{controller: c.name, path: path, l: l, cfg: cs.h.controllerChannel(c, path, msg.PurposeControl)}, nil
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

// path is the control socket controller name is listened on at, or "".
func (cs *controlListeners) path(name string) string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cl := cs.open[name]; cl != nil {
		return cl.path
	}
	return ""
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

// mutateControl is mutate for a change of a controller's control socket:
// its check returns the controller whose socket becomes path (one not yet
// pinned, for controller add). While the host runs (s.controls), path is
// listened on before the record is appended, so that a socket the host
// cannot listen on fails the change with nothing journaled, and served
// once the change is applied, the controller's old socket closed after:
// the change takes effect at once, without a restart.
func (s *Store) mutateControl(kind string, rec any, path string, check func() (*controller, error), apply func()) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	c, err := check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	cs := s.controls
	var cl *controlListener
	if cs != nil {
		if cl, err = cs.prepare(c, path); err != nil {
			return fmt.Errorf("controller %s: the host cannot listen on its control socket (%w); nothing was journaled", c.name, err)
		}
	}
	if _, err := s.append(kind, rec); err != nil {
		if cs != nil {
			cs.discard(cl)
		}
		return err
	}
	s.mu.Lock()
	apply()
	s.mu.Unlock()
	if cs != nil {
		cs.commit(cl)
	}
	return nil
}
