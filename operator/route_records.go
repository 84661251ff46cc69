package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
)

// The host journal's record kinds of route states (see doc.go): a route's
// registration with the state it has once registered, and an operator's
// change of a route's state.
const (
	kindRouteRegisterV2 = "route-register.v2"
	kindRouteState      = "route-state"
)

// recRouteRegisterV2 is a signed route revision with who registered it
// and when, and the route's state once it is registered: active or
// inactive for a new route (`route register --inactive`), the route's own
// state for a later revision (a new revision keeps it). A first-version
// route-register has none of these: its route is active.
type recRouteRegisterV2 struct {
	Record []byte     `cbor:"record"`
	State  RouteState `cbor:"state"`
	By     string     `cbor:"by"`
	At     int64      `cbor:"at"` // unix ms, by the store's clock
}

// recRouteState is an operator's change of a route's state (`route
// activate|deactivate|remove`): the state it enters, who ("uid:N") and
// when (unix ms, by the store's clock).
type recRouteState struct {
	Route string     `cbor:"route"`
	State RouteState `cbor:"state"`
	By    string     `cbor:"by"`
	At    int64      `cbor:"at"`
}

// routeRegister applies a first-version registration: its route is
// active. It predates the rule of one active route per application, so
// replay does not hold it to that rule (a journal written before it may
// have two).
func (rp *replayer) routeRegister(_ journal.Record, b *recRouteRegister) error {
	rec, id, err := rp.st.checkRoute(b.Record, rp.pub)
	if err != nil {
		return err
	}
	rp.st.addRoute(rec, b.Record, id, routeStateMark{state: RouteActive})
	return nil
}

func (rp *replayer) routeRegisterV2(_ journal.Record, b *recRouteRegisterV2) error {
	st := rp.st
	rec, id, err := st.checkRoute(b.Record, rp.pub)
	if err != nil {
		return err
	}
	if b.By == "" {
		return fmt.Errorf("route %s: the registration names no one", rec.Route)
	}
	want, err := st.registerState(rec, b.State == RouteInactive)
	if err != nil {
		return err
	}
	if b.State != want {
		return fmt.Errorf("route %s: registered %q, but the route is %s", rec.Route, b.State, want)
	}
	st.addRoute(rec, b.Record, id, routeStateMark{state: b.State, by: b.By, at: b.At})
	return nil
}

// routeState applies an operator's change of a route's state. The check
// is the state's own (checkRouteState); that a removed route had no
// unresolved attempt was the command's check when it ran, not something
// the journal's order could show again.
func (rp *replayer) routeState(_ journal.Record, b *recRouteState) error {
	if b.By == "" {
		return fmt.Errorf("route %s: the state change names no one", b.Route)
	}
	r, err := rp.st.checkRouteState(b.Route, b.State)
	if err != nil {
		return err
	}
	if r.state == b.State {
		return fmt.Errorf("route %s: changed to %s, which it already is", b.Route, b.State)
	}
	rp.st.setRouteState(r, routeStateMark{state: b.State, by: b.By, at: b.At})
	return nil
}
