package operator

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/routetable"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The store's routes: the table is package operator/routetable's, part
// of the state under Store.mu; here are the commands that change it (each
// through Store.mutateRoute, so the running host listens as the state
// says), their replay, and what of the state beside the table a route's
// checks need (its controller, the attempts of its application).

// nothingReservedOrSent ends a refusal of a dispatch for a route that is
// not active, as it arrives.
const nothingReservedOrSent = routetable.NothingReservedOrSent

// notActiveReason is why a dispatch for route name is refused, or ""
// when the route is active (Table.NotActiveReason). Store.mu is held.
func (st *state) notActiveReason(name string) string { return st.NotActiveReason(name) }

// unresolvedOf lists, sorted, the attempts that keep route r from being
// removed: those of its controller and application (any revision's) that
// are uncertain or being delivered now. Removal is final, so none may be
// left without the route an operator would resolve it through.
func (st *state) unresolvedOf(r *routetable.Route) []string {
	var out []string
	for id, a := range st.Attempts {
		if (a.State == msg.StateUncertain || a.State == msg.StateDeliveryRequested) && r.Serves(a.Controller, a.Application) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
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
	s.mu.Lock()
	rev := s.st.NextRevision(name)
	s.mu.Unlock()
	rec, err := routetable.NewRecord(name, app, rev, req)
	if err != nil {
		return views.RouteView{}, err
	}
	rec.IssuedAt = s.clock().UnixMilli()
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
		func() (any, *routetable.Rev, error) {
			var err error
			if rec, id, err = s.st.checkRoute(signed, s.pub); err != nil {
				return nil, nil, err
			}
			var listen *routetable.Rev
			body, listen, err = s.st.Registration(rec, signed, id, reg.Inactive, by, s.nowMs)
			return body, listen, err
		},
		func() {
			s.st.Add(rec, signed, id, routetable.StateMark{State: body.State, By: body.By, At: body.At})
			v = s.st.Routes[rec.Route].View()
		})
	return v, err
}

// nowMs is the store's clock in unix ms, with s.mu held.
func (s *Store) nowMs() int64 { return s.clockLocked().UnixMilli() }

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
	var r *routetable.Route
	var ch hostlog.RouteStateChange
	err := s.mutateRoute(hostlog.KindRouteState,
		func() (any, *routetable.Rev, error) {
			var listen *routetable.Rev
			var err error
			ch, r, listen, err = s.st.Change(name, to, by, s.nowMs, s.st.unresolvedOf)
			return ch, listen, err
		},
		func() { s.st.SetState(r, routetable.StateMark{State: ch.State, By: ch.By, At: ch.At}) })
	changed := true
	if errors.Is(err, routetable.ErrUnchanged) {
		changed, err = false, nil
	}
	if err != nil {
		return views.RouteView{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.View(), changed, nil
}

// RouteRegister applies a first-version registration: its route is
// active. It predates the rule of one active route per application, so
// replay does not hold it to that rule (a journal written before it may
// have two).
func (rp *replayer) RouteRegister(_ journal.Record, b *hostlog.RouteRegister) error {
	rec, id, err := rp.st.checkRoute(b.Record, rp.pub)
	if err != nil {
		return err
	}
	rp.st.Add(rec, b.Record, id, routetable.StateMark{State: hostlog.RouteActive})
	return nil
}

// RouteRegisterV2 applies a registration as the command checked it
// (Table.Replayed).
func (rp *replayer) RouteRegisterV2(_ journal.Record, b *hostlog.RouteRegisterV2) error {
	rec, id, err := rp.st.checkRoute(b.Record, rp.pub)
	if err != nil {
		return err
	}
	m, err := rp.st.Replayed(rec, b)
	if err != nil {
		return err
	}
	rp.st.Add(rec, b.Record, id, m)
	return nil
}

// RouteStateChange applies an operator's change of a route's state
// (Table.ReplayChange).
func (rp *replayer) RouteStateChange(_ journal.Record, b *hostlog.RouteStateChange) error {
	return rp.st.ReplayChange(b)
}
