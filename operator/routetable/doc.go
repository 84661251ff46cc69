// Package routetable is the host's routes: every route's signed
// revisions, its state, and the checks a registration or a change of
// state must pass. It is a part of the operator's state (package
// operator embeds a Table in it), so the caller always holds Store.mu,
// the operator's state lock: a Table takes no lock of its own and is
// read and changed only under that lock.
//
//	t := routetable.New()
//	rec, id, err := t.Check(signed, pub, pinned, controlOwner) // Verify, then CheckRevision: forks, cycles, bounds
//	t.Add(rec, signed, id, routetable.StateMark{State: hostlog.RouteActive})
//	revs := t.Active("ctl") // what the host listens on for ctl
//
// What the table does not know the operator's state tells it: whether
// the record's controller is pinned and whose control socket a path is
// (Check's funcs), and which attempts keep a route from being removed
// (Change's func; Route.Serves is the test). A Table's exported fields
// are durable content: they are the operator's snapshot (package
// operator, snapstate.go), by their Go names; its unexported index of
// forward sockets is derived from them (Rebuild).
//
// # Route states
//
// A route is active, inactive or removed (hostlog.RouteState):
// route-register.v2 records give a new route its first state and
// route-state records change it, so replay rebuilds every state (a route
// with neither, registered before route states, is active). Only active
// routes are listened on and in a controller's route table (Active,
// which the listeners and the control socket share); at most one is
// active for an application of a controller; the route bound counts
// routes not removed; removal is final and refused while an attempt of
// the route's application is uncertain or being delivered. While the
// host runs, a change through the admin socket takes effect at once
// (operator's Store.mutateRoute): the daemon opens the listener an
// activation or registration needs before its record is appended, and
// matches its listener set to the state after. A dispatch is served by
// its route's selected revision as it is when the dispatch arrives, so
// one on a channel opened before the route was deactivated or removed,
// or before its revision moved to another socket, is refused unavailable
// with nothing journaled; one admitted before and waiting for consent is
// stopped by the last-moment check, like a freeze.
package routetable
