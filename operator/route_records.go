package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// routeRegister applies a first-version registration: its route is
// active. It predates the rule of one active route per application, so
// replay does not hold it to that rule (a journal written before it may
// have two).
func (rp *replayer) RouteRegister(_ journal.Record, b *hostlog.RouteRegister) error {
	rec, id, err := rp.st.checkRoute(b.Record, rp.pub)
	if err != nil {
		return err
	}
	rp.st.addRoute(rec, b.Record, id, routeStateMark{State: hostlog.RouteActive})
	return nil
}

func (rp *replayer) RouteRegisterV2(_ journal.Record, b *hostlog.RouteRegisterV2) error {
	st := rp.st
	rec, id, err := st.checkRoute(b.Record, rp.pub)
	if err != nil {
		return err
	}
	if b.By == "" {
		return fmt.Errorf("route %s: the registration names no one", rec.Route)
	}
	want, err := st.registerState(rec, b.State == hostlog.RouteInactive)
	if err != nil {
		return err
	}
	if b.State != want {
		return fmt.Errorf("route %s: registered %q, but the route is %s", rec.Route, b.State, want)
	}
	st.addRoute(rec, b.Record, id, routeStateMark{State: b.State, By: b.By, At: b.At})
	return nil
}

// routeState applies an operator's change of a route's state. The check
// is the state's own (checkRouteState); that a removed route had no
// unresolved attempt was the command's check when it ran, not something
// the journal's order could show again.
func (rp *replayer) RouteStateChange(_ journal.Record, b *hostlog.RouteStateChange) error {
	if b.By == "" {
		return fmt.Errorf("route %s: the state change names no one", b.Route)
	}
	r, err := rp.st.checkRouteState(b.Route, b.State)
	if err != nil {
		return err
	}
	if r.State == b.State {
		return fmt.Errorf("route %s: changed to %s, which it already is", b.Route, b.State)
	}
	rp.st.setRouteState(r, routeStateMark{State: b.State, By: b.By, At: b.At})
	return nil
}
