package operator

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// The admin operations of route states: AdminRequest.Name is the route,
// AdminRequest.By who asks.
const (
	OpRouteActivate   = "route-activate"
	OpRouteDeactivate = "route-deactivate"
	OpRouteRemove     = "route-remove"
)

// routeOpState is the state each route operation asks for.
var routeOpState = map[string]RouteState{
	OpRouteActivate: RouteActive, OpRouteDeactivate: RouteInactive, OpRouteRemove: RouteRemoved,
}

// errUnchanged is a route change's check finding the route in the state
// asked already: nothing is journaled.
var errUnchanged = errors.New("unchanged")

// RouteRegistration is how `route register` registers a revision.
type RouteRegistration struct {
	// Inactive registers a new route inactive: it is not listened on
	// until `route activate`. A new revision keeps its route's state.
	Inactive bool
	// By is who registers it ("uid:N"); the store's account (this
	// process's effective uid) when empty.
	By string
}

// storeAccount is who a change made on a store opened directly is by:
// the account of the process that holds it.
func storeAccount() string { return fmt.Sprintf("uid:%d", os.Geteuid()) }

// markTime is when a route's state was set, RFC 3339, or "" when unknown.
func markTime(m routeStateMark) string {
	if m.by == "" {
		return ""
	}
	return time.UnixMilli(m.at).UTC().Format(time.RFC3339)
}

// RegisterRoute signs and journals a new revision of route name for app:
// a new route is active.
func (s *Store) RegisterRoute(name, app string, req RouteRequest) (RouteView, error) {
	return s.RegisterRouteAs(name, app, req, RouteRegistration{})
}

// RegisterRouteAs signs and journals a new revision of route name for app
// as reg says.
func (s *Store) RegisterRouteAs(name, app string, req RouteRequest, reg RouteRegistration) (RouteView, error) {
	if s.key == nil {
		return RouteView{}, fmt.Errorf("store %s is open read-only", s.dir)
	}
	replaces, err := hex.DecodeString(req.Replaces)
	if err != nil {
		return RouteView{}, refusedf("route %s: replaces %q is not hex", name, req.Replaces)
	}
	if len(replaces) == 0 {
		replaces = nil
	}
	s.mu.Lock()
	rev := uint64(1)
	if r := s.st.routes[name]; r != nil {
		rev = uint64(len(r.revs)) + 1
	}
	s.mu.Unlock()
	rec := msg.RouteRecord{
		Route: name, Revision: rev, Replaces: replaces, Application: app,
		Protocol: msg.ProtocolOracleOperationsV1, Controller: req.Controller,
		Upstream: req.Upstream, Forward: req.Forward, Reverse: req.Reverse, Prefix: req.Prefix,
		Timeouts: req.Timeouts, IssuedAt: s.clock().UnixMilli(), AppAccount: req.AppAccount,
	}
	signed, err := msg.SignRoute(s.key, rec)
	if err != nil {
		return RouteView{}, err
	}
	return s.importRoute(signed, reg)
}

// ImportRoute journals a route record already signed with the operator's
// key, refusing one that does not verify, forks or cycles the route's
// history, passes a bound or would give its application a second active
// route. A new route is active.
func (s *Store) ImportRoute(signed []byte) (RouteView, error) {
	return s.importRoute(signed, RouteRegistration{})
}

func (s *Store) importRoute(signed []byte, reg RouteRegistration) (RouteView, error) {
	by := reg.By
	if by == "" {
		by = storeAccount()
	}
	var rec msg.RouteRecord
	var id []byte
	var body recRouteRegisterV2
	var v RouteView
	err := s.mutateRoute(kindRouteRegisterV2,
		func() (any, *routeRev, error) {
			var err error
			if rec, id, err = s.st.checkRoute(signed, s.pub); err != nil {
				return nil, nil, err
			}
			state, err := s.st.registerState(rec, reg.Inactive)
			if err != nil {
				return nil, nil, err
			}
			body = recRouteRegisterV2{Record: signed, State: state, By: by, At: s.clockLocked().UnixMilli()}
			var listen *routeRev
			if state == RouteActive {
				listen = &routeRev{rec: rec, signed: signed, id: id}
			}
			return body, listen, nil
		},
		func() {
			s.st.addRoute(rec, signed, id, routeStateMark{state: body.State, by: body.By, at: body.At})
			v = routeView(s.st.routes[rec.Route])
		})
	return v, err
}

// SetRouteState journals route name's change to state to, by who asks
// (the store's account when by is empty), and reports whether it changed:
// activating an active route or deactivating an inactive one journals
// nothing (deactivation is a kill switch: asking twice is no error).
// Removal is final, and refused while an attempt of the route is
// unresolved. While the host runs, the change takes effect at once: an
// activated route's forward socket is listened on before its record is
// journaled, a deactivated or removed route's listener is closed after.
func (s *Store) SetRouteState(name string, to RouteState, by string) (RouteView, bool, error) {
	if by == "" {
		by = storeAccount()
	}
	var r *route
	var mark routeStateMark
	err := s.mutateRoute(kindRouteState,
		func() (any, *routeRev, error) {
			var err error
			if r, err = s.st.checkRouteState(name, to); err != nil {
				return nil, nil, err
			}
			if r.state == to {
				return nil, nil, errUnchanged
			}
			if to == RouteRemoved {
				if ids := s.st.unresolvedOf(r); len(ids) > 0 {
					return nil, nil, unresolvedRefusal(name, ids)
				}
			}
			mark = routeStateMark{state: to, by: by, at: s.clockLocked().UnixMilli()}
			var listen *routeRev
			if to == RouteActive {
				sel := *r.selected()
				listen = &sel
			}
			return recRouteState{Route: name, State: to, By: by, At: mark.at}, listen, nil
		},
		func() { s.st.setRouteState(r, mark) })
	changed := true
	if errors.Is(err, errUnchanged) {
		changed, err = false, nil
	}
	if err != nil {
		return RouteView{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return routeView(r), changed, nil
}

// mutateRoute is mutate for a change of the routes the host serves: its
// check also says which revision the change will have the host listen on
// (nil: none new). While the host runs (s.listening), that listener is
// opened before the record is appended, so that a forward socket the host
// cannot listen on refuses the change with nothing journaled, and the
// listener set is matched to the state once the change is applied: the
// change takes effect at once, without a restart.
func (s *Store) mutateRoute(kind string, check func() (any, *routeRev, error), apply func()) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	rec, listen, err := check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	ls := s.listening
	if ls != nil && listen != nil {
		if err := ls.prepare(*listen); err != nil {
			return fmt.Errorf("route %s: the host cannot listen on its forward socket (%w); nothing was journaled", listen.rec.Route, err)
		}
	}
	if _, err := s.append(kind, rec); err != nil {
		if ls != nil {
			ls.settle() // closes what was prepared; the state did not change
		}
		return err
	}
	s.mu.Lock()
	apply()
	s.mu.Unlock()
	if ls != nil {
		if err := ls.settle(); err != nil {
			return fmt.Errorf("the change is journaled, but the host could not listen as it says: %w", err)
		}
	}
	return nil
}
