package operator

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/operator/routetable"
)

// errUnchanged is a change's check finding what it asks already so:
// nothing is journaled.
var errUnchanged = errors.New("unchanged")

// The three shapes of an administrative change. Each keeps the same order:
// check it against the state, append its record to the journal, then apply
// it to the state; check and apply run under Store.mu, and Store.adminMu
// holds off every other change from the check to the apply, so what was
// checked still holds when it is applied. A refused check appends nothing;
// a failed append applies nothing. A change of what the host listens on
// has the daemon open the socket before the append (Listeners).

// mutate runs one administrative change in the order every change keeps
// (above): check, append, apply.
func (s *Store) mutate(kind string, rec any, check func() error, apply func()) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	err := check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := s.append(kind, rec); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	apply()
	return nil
}

// mutateControl is mutate for a change of a controller's control socket:
// its check returns the controller whose socket becomes path (one not yet
// pinned, for controller add). The daemon (Listeners) binds path before
// the record is appended, so that a socket the host cannot listen on
// fails the change with nothing journaled, and serves it once the change
// is applied, the controller's old socket closed after: the change takes
// effect at once, without a restart.
func (s *Store) mutateControl(kind string, rec any, path string, check func() (*controller, error), apply func()) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	c, err := check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	ch, err := s.daemon.PrepareControl(c.peer(), path)
	if err != nil {
		return fmt.Errorf("controller %s: the host cannot listen on its control socket (%w); nothing was journaled", c.Name, err)
	}
	if _, err := s.append(kind, rec); err != nil {
		ch.Discard()
		return err
	}
	s.mu.Lock()
	apply()
	s.mu.Unlock()
	ch.Commit()
	return nil
}

// mutateRoute is mutate for a change of the routes the host serves: its
// check also says which revision the change will have the host listen on
// (nil: none new). The daemon (Listeners) opens that listener before the
// record is appended, so that a forward socket the host cannot listen on
// refuses the change with nothing journaled, and matches its listener set
// to the state once the change is applied: the change takes effect at
// once, without a restart.
func (s *Store) mutateRoute(kind string, check func() (any, *routetable.Rev, error), apply func()) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	rec, listen, err := check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	ls := s.daemon
	if listen != nil {
		if err := ls.PrepareRoute(listen.Record); err != nil {
			return fmt.Errorf("route %s: the host cannot listen on its forward socket (%w); nothing was journaled", listen.Record.Route, err)
		}
	}
	if _, err := s.append(kind, rec); err != nil {
		ls.SettleRoutes() // closes what was prepared; the state did not change
		return err
	}
	s.mu.Lock()
	apply()
	s.mu.Unlock()
	if err := ls.SettleRoutes(); err != nil {
		return fmt.Errorf("the change is journaled, but the host could not listen as it says: %w", err)
	}
	return nil
}
