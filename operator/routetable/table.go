package routetable

import (
	"fmt"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// Table is every route the host has registered, in registration order.
// Store.mu, the operator's state lock, guards it: its caller holds that
// lock for every method, and Table takes none of its own.
type Table struct {
	// Routes is every route by name, removed ones included; RouteOrder
	// their names in registration order (the host's route order).
	Routes     map[string]*Route
	RouteOrder []string
	// forwards indexes the forward socket of each route's selected
	// revision (removed routes' aside) to the route's name: derived.
	forwards map[string]string
}

// New is an empty table.
func New() Table {
	return Table{Routes: map[string]*Route{}, forwards: map[string]string{}}
}

// Route is every revision of one route (the selected one is the last)
// and its state.
type Route struct {
	Name string
	Revs []Rev
	StateMark
}

// Rev is one revision of a route: its record, the signed bytes it was
// registered as (never changed once registered, so a copy may share
// them) and its RouteID.
type Rev struct {
	Record msg.RouteRecord
	Signed []byte
	ID     []byte
}

// StateMark is a route's state and who set it when (unix ms); By is
// empty for a route registered before route states (active).
type StateMark struct {
	State hostlog.RouteState
	By    string
	At    int64
}

// Selected is the route's selected revision: its last.
func (r *Route) Selected() *Rev { return &r.Revs[len(r.Revs)-1] }

// SelectedRecord is route name's selected record, whatever its state, and
// whether the route exists.
func (t *Table) SelectedRecord(name string) (msg.RouteRecord, bool) {
	if r := t.Routes[name]; r != nil {
		return r.Selected().Record, true
	}
	return msg.RouteRecord{}, false
}

// Time is when the state was set, RFC 3339, or "" when unknown.
func (m StateMark) Time() string {
	if m.By == "" {
		return ""
	}
	return time.UnixMilli(m.At).UTC().Format(time.RFC3339)
}

// Serves reports whether a revision of r (any, not only the selected
// one) delivers application app for controller ctrl: an attempt of
// theirs keeps r from being removed while it is unresolved.
func (r *Route) Serves(ctrl, app string) bool {
	for _, rv := range r.Revs {
		if rv.Record.Controller == ctrl && rv.Record.Application == app {
			return true
		}
	}
	return false
}

// Rebuild makes the derived index of a table decoded from a snapshot:
// the forward sockets of the routes not removed. A route with no
// revision is refused.
func (t *Table) Rebuild() error {
	if t.Routes == nil {
		t.Routes = map[string]*Route{}
	}
	t.forwards = map[string]string{}
	for _, name := range t.RouteOrder {
		r := t.Routes[name]
		if r == nil || len(r.Revs) == 0 {
			return fmt.Errorf("route %s has no revision", name)
		}
		if r.State != hostlog.RouteRemoved {
			t.forwards[r.Selected().Record.Forward] = name
		}
	}
	return nil
}

// Add applies a checked revision (CheckRevision); m is the state of a
// new route (a later revision keeps the route's).
func (t *Table) Add(rec msg.RouteRecord, signed, id []byte, m StateMark) {
	r := t.Routes[rec.Route]
	if r == nil {
		r = &Route{Name: rec.Route, StateMark: m}
		t.Routes[rec.Route] = r
		t.RouteOrder = append(t.RouteOrder, rec.Route)
	} else {
		delete(t.forwards, r.Selected().Record.Forward)
	}
	r.Revs = append(r.Revs, Rev{Record: rec, Signed: signed, ID: id})
	t.forwards[rec.Forward] = rec.Route
}

// SetState applies a route's new state (CheckState). A removed route
// gives up its forward socket: another route may be registered on it.
func (t *Table) SetState(r *Route, m StateMark) {
	r.StateMark = m
	if fwd := r.Selected().Record.Forward; m.State == hostlog.RouteRemoved && t.forwards[fwd] == r.Name {
		delete(t.forwards, fwd)
	}
}

// Active is the selected revision of each active route of controller
// ctrl, in the host's route order (registration order): the routes the
// host listens on for it and the table its control channel answers
// (msg.RoutesResult.Active). The copies share the revisions' bytes,
// which are never changed once registered.
func (t *Table) Active(ctrl string) []Rev {
	var out []Rev
	for _, name := range t.RouteOrder {
		r := t.Routes[name]
		if sel := r.Selected(); r.State == hostlog.RouteActive && sel.Record.Controller == ctrl {
			out = append(out, *sel)
		}
	}
	return out
}

// ActiveFor names the active route other than except whose selected
// revision delivers application app for controller ctrl, or "".
func (t *Table) ActiveFor(ctrl, app, except string) string {
	for _, name := range t.RouteOrder {
		r := t.Routes[name]
		if sel := r.Selected().Record; name != except && r.State == hostlog.RouteActive && sel.Controller == ctrl && sel.Application == app {
			return name
		}
	}
	return ""
}

// SocketOf names the first route, in the host's order, of which path is
// the selected revision's forward, reverse or upstream socket, or "".
func (t *Table) SocketOf(path string) string {
	for _, name := range t.RouteOrder {
		rec := t.Routes[name].Selected().Record
		if path == rec.Forward || path == rec.Reverse || path == rec.Upstream {
			return name
		}
	}
	return ""
}

// notRemoved counts the routes that are not removed: what
// msg.MaxSelectedRoutes bounds.
func (t *Table) notRemoved() int {
	n := 0
	for _, r := range t.Routes {
		if r.State != hostlog.RouteRemoved {
			n++
		}
	}
	return n
}
