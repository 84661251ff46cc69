package operator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// routeStateMark is a route's state and who set it when (unix ms); by is
// empty for a route registered before route states (active).
type routeStateMark struct {
	State hostlog.RouteState
	By    string
	At    int64
}

// maxNamedAttempts bounds the attempts a refused removal names.
const maxNamedAttempts = 10

// activeRoutes is the selected revision of each active route of
// controller ctrl, in the host's route order (registration order): the
// routes the host listens on for it and the table its control channel
// answers (msg.RoutesResult.Active). The copies share the revisions'
// bytes, which are never changed once registered. Store.mu must be held.
func (st *state) activeRoutes(ctrl string) []routeRev {
	var out []routeRev
	for _, name := range st.RouteOrder {
		r := st.Routes[name]
		if sel := r.selected(); r.State == hostlog.RouteActive && sel.Record.Controller == ctrl {
			out = append(out, *sel)
		}
	}
	return out
}

// activeFor names the active route other than except whose selected
// revision delivers application app for controller ctrl, or "".
func (st *state) activeFor(ctrl, app, except string) string {
	for _, name := range st.RouteOrder {
		r := st.Routes[name]
		if sel := r.selected().Record; name != except && r.State == hostlog.RouteActive && sel.Controller == ctrl && sel.Application == app {
			return name
		}
	}
	return ""
}

// notRemoved counts the routes that are not removed: what
// msg.MaxSelectedRoutes bounds.
func (st *state) notRemoved() int {
	n := 0
	for _, r := range st.Routes {
		if r.State != hostlog.RouteRemoved {
			n++
		}
	}
	return n
}

// registerState is the state route rec.Route has once rec is registered:
// a new route is active unless inactive is asked; a new revision keeps
// the route's state (asking inactive of an active route is refused). A
// registration that would give an application of a controller a second
// active route is refused naming the first.
func (st *state) registerState(rec msg.RouteRecord, inactive bool) (hostlog.RouteState, error) {
	r := st.Routes[rec.Route]
	want := hostlog.RouteActive
	switch {
	case r == nil && inactive:
		return hostlog.RouteInactive, nil
	case r != nil && inactive && r.State == hostlog.RouteActive:
		return "", views.Refusedf("route %s is active and a new revision keeps its state: deactivate it first (steward-operator route deactivate %s)", rec.Route, rec.Route)
	case r != nil:
		want = r.State
		if sel := r.selected().Record; want != hostlog.RouteActive || sel.Controller == rec.Controller && sel.Application == rec.Application {
			return want, nil
		}
	}
	if other := st.activeFor(rec.Controller, rec.Application, rec.Route); other != "" {
		return "", views.Refusedf("route %s: application %s of controller %s already has active route %s (at most one active route an application): deactivate %s first, or register this one --inactive",
			rec.Route, rec.Application, rec.Controller, other, other)
	}
	return want, nil
}

// checkRouteState checks that route name may enter state to: it exists,
// is not removed (removal is final) and, to be activated, its
// application has no other active route of its controller.
func (st *state) checkRouteState(name string, to hostlog.RouteState) (*route, error) {
	r := st.Routes[name]
	if r == nil {
		return nil, views.Refusedf("no route %s", name)
	}
	switch to {
	case hostlog.RouteActive, hostlog.RouteInactive, hostlog.RouteRemoved:
	default:
		return nil, views.Refusedf("route %s: %q is not a route state (%s, %s or %s)", name, to, hostlog.RouteActive, hostlog.RouteInactive, hostlog.RouteRemoved)
	}
	if r.State == hostlog.RouteRemoved {
		return nil, views.Refusedf("route %s was removed: removal is final and its name stays taken; nothing was changed", name)
	}
	if sel := r.selected().Record; to == hostlog.RouteActive && r.State != hostlog.RouteActive {
		if other := st.activeFor(sel.Controller, sel.Application, name); other != "" {
			return nil, views.Refusedf("route %s: application %s of controller %s already has active route %s (at most one active route an application): deactivate %s first",
				name, sel.Application, sel.Controller, other, other)
		}
	}
	return r, nil
}

// setRouteState applies a route's new state. A removed route gives up its
// forward socket: another route may be registered on it.
func (st *state) setRouteState(r *route, m routeStateMark) {
	r.routeStateMark = m
	if fwd := r.selected().Record.Forward; m.State == hostlog.RouteRemoved && st.forwards[fwd] == r.Name {
		delete(st.forwards, fwd)
	}
}

// unresolvedOf lists, sorted, the attempts that keep route r from being
// removed: those of its controller and application (any revision's) that
// are uncertain or being delivered now. Removal is final, so none may be
// left without the route an operator would resolve it through.
func (st *state) unresolvedOf(r *route) []string {
	var out []string
	for id, a := range st.Attempts {
		if a.State != msg.StateUncertain && a.State != msg.StateDeliveryRequested {
			continue
		}
		if slices.ContainsFunc(r.Revs, func(rv routeRev) bool {
			return rv.Record.Controller == a.Controller && rv.Record.Application == a.Application
		}) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// unresolvedRefusal is the refusal of removing route name while the
// attempts ids are unresolved, naming at most maxNamedAttempts of them.
func unresolvedRefusal(name string, ids []string) error {
	named := strings.Join(ids[:min(len(ids), maxNamedAttempts)], ", ")
	if len(ids) > maxNamedAttempts {
		named += fmt.Sprintf(" and %d more", len(ids)-maxNamedAttempts)
	}
	noun := "attempts"
	if len(ids) == 1 {
		noun = "attempt"
	}
	return views.Refusedf("route %s has %d unresolved %s (%s): resolve each first with steward-operator attempts resolve ID (--redeliver|--release|--charge) --reason TEXT; nothing was removed",
		name, len(ids), noun, named)
}

// nothingReservedOrSent ends a refusal of a dispatch for a route that is
// not active, as it arrives.
const nothingReservedOrSent = "; nothing was reserved or sent"

// notActiveReason is why a dispatch for route name is refused, or "" when
// the route is active: what an agent reads (it names the route, nothing
// else of the operator's).
func (st *state) notActiveReason(name string) string {
	r := st.Routes[name]
	switch {
	case r == nil:
		return "route " + name + " is not registered on this host" + nothingReservedOrSent
	case r.State == hostlog.RouteRemoved:
		return "route " + name + " is not active: the operator removed it" + nothingReservedOrSent
	case r.State != hostlog.RouteActive:
		return "route " + name + " is not active: the operator deactivated it" + nothingReservedOrSent
	}
	return ""
}
