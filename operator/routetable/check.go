package routetable

import (
	"fmt"
	"strings"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// MaxNamedAttempts bounds the attempts a refused removal names.
const MaxNamedAttempts = 10

// NothingReservedOrSent ends a refusal of a dispatch for a route that is
// not active, as it arrives.
const NothingReservedOrSent = "; nothing was reserved or sent"

// Verify checks a signed route revision on its own: its signature by the
// operator key pub and what a route record may hold (hostlog's bounds).
// It returns the record and its RouteID.
func Verify(signed []byte, pub *wire.HybridPublicKey) (msg.RouteRecord, []byte, error) {
	rec, err := msg.VerifyRoute(signed, pub)
	if err != nil {
		return rec, nil, views.Refusedf("%v", err)
	}
	id := msg.RouteID(signed)
	if err := hostlog.ValidName("route", rec.Route); err != nil {
		return rec, nil, views.Refusedf("%v", err)
	}
	if err := hostlog.ValidRouteRecord(rec); err != nil {
		return rec, nil, views.Refusedf("%v", err)
	}
	return rec, id, nil
}

// Check is Verify and CheckRevision with what the operator's state
// decides around them, in the order a refusal names the first failure:
// pinned reports whether the record's controller is pinned, controlOwner
// names the controller whose control socket a path is ("" for none),
// which a forward socket must not be.
func (t *Table) Check(signed []byte, pub *wire.HybridPublicKey, pinned func(ctrl string) bool, controlOwner func(path string) string) (msg.RouteRecord, []byte, error) {
	rec, id, err := Verify(signed, pub)
	if err != nil {
		return rec, nil, err
	}
	if !pinned(rec.Controller) {
		return rec, nil, views.Refusedf("route %s: no controller named %s", rec.Route, rec.Controller)
	}
	if err := t.CheckRevision(rec, id); err != nil {
		return rec, nil, err
	}
	if owner := controlOwner(rec.Forward); owner != "" {
		return rec, nil, views.Refusedf("route %s: forward socket %s is controller %s's control socket", rec.Route, rec.Forward, owner)
	}
	return rec, id, nil
}

// CheckRevision checks a verified revision (Verify) against the route's
// history and the bounds: it must replace exactly the selected revision
// (no forks), never a record already in the history (no cycles), at most
// msg.MaxRouteRevisions a route and msg.MaxSelectedRoutes routes that are
// not removed; a removed route takes no revision, and no other route's
// selected revision may have its forward socket.
func (t *Table) CheckRevision(rec msg.RouteRecord, id []byte) error {
	for _, name := range t.RouteOrder {
		for _, rv := range t.Routes[name].Revs {
			if string(rv.ID) == string(id) {
				return views.Refusedf("route %s: cycle: record %x is already in the history of route %s", rec.Route, id[:8], name)
			}
		}
	}
	if r := t.Routes[rec.Route]; r == nil {
		if err := t.checkFirst(rec); err != nil {
			return err
		}
	} else if err := checkNext(r, rec); err != nil {
		return err
	}
	if other, ok := t.forwards[rec.Forward]; ok && other != rec.Route {
		return views.Refusedf("route %s: forward socket %s is route %s's", rec.Route, rec.Forward, other)
	}
	return nil
}

// checkFirst checks the first revision of a new route.
func (t *Table) checkFirst(rec msg.RouteRecord) error {
	if len(rec.Replaces) != 0 {
		return views.Refusedf("route %s: the first revision replaces nothing, but names %x", rec.Route, rec.Replaces)
	}
	if n := t.notRemoved(); n >= msg.MaxSelectedRoutes {
		return views.Refusedf("route %s: %d routes are registered and not removed, the bound is %d: remove one first (steward-operator route remove)", rec.Route, n, msg.MaxSelectedRoutes)
	}
	if rec.Revision != 1 {
		return views.Refusedf("route %s: the first revision must be 1, not %d", rec.Route, rec.Revision)
	}
	return nil
}

// checkNext checks a later revision of route r.
func checkNext(r *Route, rec msg.RouteRecord) error {
	if r.State == hostlog.RouteRemoved {
		return views.Refusedf("route %s was removed: removal is final and its name stays taken, so it takes no new revision (register the application under another route name)", rec.Route)
	}
	sel := r.Selected()
	if string(rec.Replaces) != string(sel.ID) {
		for i, rv := range r.Revs {
			if string(rv.ID) == string(rec.Replaces) {
				return views.Refusedf("route %s: fork: replaces revision %d, but revision %d is selected", rec.Route, i+1, len(r.Revs))
			}
		}
		return views.Refusedf("route %s: replaces %x, which is not its selected revision %x", rec.Route, rec.Replaces, sel.ID[:8])
	}
	if len(r.Revs) >= msg.MaxRouteRevisions {
		return views.Refusedf("route %s: %d revisions, the bound is %d", rec.Route, len(r.Revs), msg.MaxRouteRevisions)
	}
	if rec.Revision != uint64(len(r.Revs))+1 {
		return views.Refusedf("route %s: revision %d must be %d", rec.Route, rec.Revision, len(r.Revs)+1)
	}
	return nil
}

// RegisterState is the state route rec.Route has once rec is registered:
// a new route is active unless inactive is asked; a new revision keeps
// the route's state (asking inactive of an active route is refused). A
// registration that would give an application of a controller a second
// active route is refused naming the first.
func (t *Table) RegisterState(rec msg.RouteRecord, inactive bool) (hostlog.RouteState, error) {
	r := t.Routes[rec.Route]
	want := hostlog.RouteActive
	switch {
	case r == nil && inactive:
		return hostlog.RouteInactive, nil
	case r != nil && inactive && r.State == hostlog.RouteActive:
		return "", views.Refusedf("route %s is active and a new revision keeps its state: deactivate it first (steward-operator route deactivate %s)", rec.Route, rec.Route)
	case r != nil:
		want = r.State
		if sel := r.Selected().Record; want != hostlog.RouteActive || sel.Controller == rec.Controller && sel.Application == rec.Application {
			return want, nil
		}
	}
	if other := t.ActiveFor(rec.Controller, rec.Application, rec.Route); other != "" {
		return "", views.Refusedf("route %s: application %s of controller %s already has active route %s (at most one active route an application): deactivate %s first, or register this one --inactive",
			rec.Route, rec.Application, rec.Controller, other, other)
	}
	return want, nil
}

// CheckState checks that route name may enter state to: it exists, is
// not removed (removal is final) and, to be activated, its application
// has no other active route of its controller.
func (t *Table) CheckState(name string, to hostlog.RouteState) (*Route, error) {
	r := t.Routes[name]
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
	if sel := r.Selected().Record; to == hostlog.RouteActive && r.State != hostlog.RouteActive {
		if other := t.ActiveFor(sel.Controller, sel.Application, name); other != "" {
			return nil, views.Refusedf("route %s: application %s of controller %s already has active route %s (at most one active route an application): deactivate %s first",
				name, sel.Application, sel.Controller, other, other)
		}
	}
	return r, nil
}

// UnresolvedRefusal is the refusal of removing route name while the
// attempts ids are unresolved, naming at most MaxNamedAttempts of them.
func UnresolvedRefusal(name string, ids []string) error {
	named := strings.Join(ids[:min(len(ids), MaxNamedAttempts)], ", ")
	if len(ids) > MaxNamedAttempts {
		named += fmt.Sprintf(" and %d more", len(ids)-MaxNamedAttempts)
	}
	noun := "attempts"
	if len(ids) == 1 {
		noun = "attempt"
	}
	return views.Refusedf("route %s has %d unresolved %s (%s): resolve each first with steward-operator attempts resolve ID (--redeliver|--release|--charge) --reason TEXT; nothing was removed",
		name, len(ids), noun, named)
}

// NotActiveReason is why a dispatch for route name is refused, or ""
// when the route is active: what an agent reads (it names the route,
// nothing else of the operator's).
func (t *Table) NotActiveReason(name string) string {
	r := t.Routes[name]
	switch {
	case r == nil:
		return "route " + name + " is not registered on this host" + NothingReservedOrSent
	case r.State == hostlog.RouteRemoved:
		return "route " + name + " is not active: the operator removed it" + NothingReservedOrSent
	case r.State != hostlog.RouteActive:
		return "route " + name + " is not active: the operator deactivated it" + NothingReservedOrSent
	}
	return ""
}
