package operator

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// errUnchanged is a route change's check finding the route in the state
// asked already: nothing is journaled.
var errUnchanged = errors.New("unchanged")

// markTime is when a route's state was set, RFC 3339, or "" when unknown.
func markTime(m routeStateMark) string {
	if m.By == "" {
		return ""
	}
	return time.UnixMilli(m.At).UTC().Format(time.RFC3339)
}

// RegisterRoute signs and journals a new revision of route name for app:
// a new route is active.
func (s *Store) RegisterRoute(name, app string, req views.RouteRequest) (views.RouteView, error) {
	return s.RegisterRouteAs(name, app, req, views.RouteRegistration{})
}

// RegisterRouteAs signs and journals a new revision of route name for app
// as reg says.
func (s *Store) RegisterRouteAs(name, app string, req views.RouteRequest, reg views.RouteRegistration) (views.RouteView, error) {
	if s.key == nil {
		return views.RouteView{}, fmt.Errorf("store %s is open read-only", s.dir)
	}
	replaces, err := hex.DecodeString(req.Replaces)
	if err != nil {
		return views.RouteView{}, views.Refusedf("route %s: replaces %q is not hex", name, req.Replaces)
	}
	if len(replaces) == 0 {
		replaces = nil
	}
	s.mu.Lock()
	rev := uint64(1)
	if r := s.st.Routes[name]; r != nil {
		rev = uint64(len(r.Revs)) + 1
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
		return views.RouteView{}, err
	}
	return s.importRoute(signed, reg)
}

// ImportRoute journals a route record already signed with the operator's
// key, refusing one that does not verify, forks or cycles the route's
// history, passes a bound or would give its application a second active
// route. A new route is active.
func (s *Store) ImportRoute(signed []byte) (views.RouteView, error) {
	return s.importRoute(signed, views.RouteRegistration{})
}

func (s *Store) importRoute(signed []byte, reg views.RouteRegistration) (views.RouteView, error) {
	by := reg.By
	if by == "" {
		by = views.OwnAccount()
	}
	var rec msg.RouteRecord
	var id []byte
	var body hostlog.RouteRegisterV2
	var v views.RouteView
	err := s.mutateRoute(hostlog.KindRouteRegisterV2,
		func() (any, *routeRev, error) {
			var err error
			if rec, id, err = s.st.checkRoute(signed, s.pub); err != nil {
				return nil, nil, err
			}
			state, err := s.st.registerState(rec, reg.Inactive)
			if err != nil {
				return nil, nil, err
			}
			body = hostlog.RouteRegisterV2{Record: signed, State: state, By: by, At: s.clockLocked().UnixMilli()}
			var listen *routeRev
			if state == hostlog.RouteActive {
				listen = &routeRev{Record: rec, Signed: signed, ID: id}
			}
			return body, listen, nil
		},
		func() {
			s.st.addRoute(rec, signed, id, routeStateMark{State: body.State, By: body.By, At: body.At})
			v = routeView(s.st.Routes[rec.Route])
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
func (s *Store) SetRouteState(name string, to hostlog.RouteState, by string) (views.RouteView, bool, error) {
	if by == "" {
		by = views.OwnAccount()
	}
	var r *route
	var mark routeStateMark
	err := s.mutateRoute(hostlog.KindRouteState,
		func() (any, *routeRev, error) {
			var err error
			if r, err = s.st.checkRouteState(name, to); err != nil {
				return nil, nil, err
			}
			if r.State == to {
				return nil, nil, errUnchanged
			}
			if to == hostlog.RouteRemoved {
				if ids := s.st.unresolvedOf(r); len(ids) > 0 {
					return nil, nil, unresolvedRefusal(name, ids)
				}
			}
			mark = routeStateMark{State: to, By: by, At: s.clockLocked().UnixMilli()}
			var listen *routeRev
			if to == hostlog.RouteActive {
				sel := *r.selected()
				listen = &sel
			}
			return hostlog.RouteStateChange{Route: name, State: to, By: by, At: mark.At}, listen, nil
		},
		func() { s.st.setRouteState(r, mark) })
	changed := true
	if errors.Is(err, errUnchanged) {
		changed, err = false, nil
	}
	if err != nil {
		return views.RouteView{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return routeView(r), changed, nil
}
