package msg

// The control channel: one socket per controller, served by the host
// beside the routes' forward sockets (Bundle.Control). It carries what is
// not a route's own: the live route table (Routes), the host's record of an
// attempt (Inspect) and an agent's allowance (Allowance). A controller with
// no route still has it, so it learns of a route the operator activates
// later without restarting.
//
//	routes       -> routes-result  the routes active for this controller now
//	routes-watch -> routes-result  the same, once they differ from the table the controller holds
//	inspect   -> inspect-result    as on a forward socket
//	allowance -> allowance-result  as on a forward socket
//
// The controller dials it with its tool key (RoleControllerTool), the host
// listens (RoleHost), and the channel's purpose is PurposeControl.

// Frame types of the control channel.
const (
	TypeRoutes       = "routes"
	TypeRoutesResult = "routes-result"
	// TypeRoutesWatch (version 1 of it, new in P2.4) is the route table
	// pushed: the host holds the request until the controller's table
	// differs from the one the request names, so that a call reads its
	// route from the controller's memory instead of asking on every call.
	TypeRoutesWatch = "routes-watch"
)

// PurposeControl is the purpose of a controller's control channel.
const PurposeControl = "control"

// MaxKnownRoutes bounds Routes.Known: the route ids a controller says it
// already holds. A controller holds at most the active routes, which are at
// most MaxSelectedRoutes, each known by its current revision; the bound
// leaves room for revisions replaced between two lookups.
const MaxKnownRoutes = 8 * MaxSelectedRoutes

// Routes asks the host which routes are active for the asking controller
// (the channel's peer, never a name in the frame). Known lists the RouteIDs
// of signed records the controller has already verified, so that the host
// sends each record's bytes once and a lookup on every call stays small.
type Routes struct {
	Known [][]byte `cbor:"known,omitempty"`
}

// RoutesResult is the host's route table for one controller: Active the
// RouteIDs of its active routes (the selected revision of each, in the
// host's order; at most one per application), and Records the signed
// RouteRecords of those Active ids that were not in Routes.Known. A route
// not in Active is not offered: deactivated, removed, or never registered.
// The controller verifies every record with the host key of its bundle and
// checks that its RouteID is in Active and that it names this controller.
type RoutesResult struct {
	Active  [][]byte `cbor:"active"`
	Records [][]byte `cbor:"records,omitempty"`
}

// RoutesWatch asks for the controller's route table once it differs from
// the one the controller holds: Active the ids, in the host's order, of the
// last RoutesResult it applied (none at first), Known as in Routes. The host
// answers a RoutesResult at once when its table differs from Active, else
// when it changes, else after an idle time of its own (the controller then
// watches again), and it takes a watch naming its current table as the
// controller's word that it holds it: a route change returns only once every
// watching controller has said so, or after a bound (DESIGN.md section 2,
// "The route table, pushed").
type RoutesWatch struct {
	Known  [][]byte `cbor:"known,omitempty"`
	Active [][]byte `cbor:"active,omitempty"`
}
