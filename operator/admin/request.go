package admin

import (
	"path/filepath"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
)

// The admin socket's protocol: roles, purpose, frame types, and the code
// of a refused request (a refusal of its input: the command exits 2).
const (
	RoleAdmin        = "operator-admin"
	RoleAdminClient  = "operator-admin-client"
	PurposeAdmin     = "admin"
	TypeAdmin        = "admin"
	TypeAdminResult  = "admin-result"
	CodeRefusedInput = "refused-input"
)

// SocketName is the admin socket's name in the store, where the host binds
// it (unless told otherwise: host.ServeOptions.AdminSocket) and Dial looks.
const SocketName = "admin.sock"

// SocketPath is the admin socket of the store in dir.
func SocketPath(dir string) string { return filepath.Join(dir, SocketName) }

// The operations.
const (
	OpControllerAdd = "controller-add"
	OpPurseFund     = "purse-fund"
	OpPurseFreeze   = "purse-freeze"
	OpPurseThaw     = "purse-thaw"
	OpGrantIssue    = "grant-issue"
	OpGrantRevoke   = "grant-revoke"
	OpRouteRegister = "route-register"
	// The attempt operations: Name is the state filter of a list and the
	// attempt of an inspect; a resolve carries Resolve.
	OpAttemptList    = "attempt-list"
	OpAttemptInspect = "attempt-inspect"
	OpAttemptResolve = "attempt-resolve"
)

// OpControllerControl sets a controller's control socket (Control): one
// added before `controller add` recorded it, or a new one. Through the
// running host, it and OpControllerAdd take effect at once.
const OpControllerControl = "controller-control"

// Request is one administrative request, run by Do on a store a command
// opened, or by the running host for a command that found the journal
// locked.
type Request struct {
	Op     string              `cbor:"op"`
	Name   string              `cbor:"name"` // controller, grant id or route
	App    string              `cbor:"app"`
	UID    uint32              `cbor:"uid"`
	Amount uint64              `cbor:"amount"`
	Keys   []byte              `cbor:"keys"`
	Grant  *Grant              `cbor:"grant"`
	Route  *views.RouteRequest `cbor:"route"`
	// Resolve is an attempt resolve's decision.
	Resolve *views.ResolveRequest `cbor:"resolve"`
	// Agent is an agent set's limits.
	Agent *views.AgentSpec `cbor:"agent"`
	// By is who asks a route change or an answer: the running host
	// sets it from the admin connection's SO_PEERCRED ("uid:N"), never
	// from what the request says; the command sets its own account for a
	// store it opens itself.
	By string `cbor:"by,omitempty"`
	// Inactive registers a new route inactive (`route register --inactive`).
	Inactive bool `cbor:"inactive,omitempty"`
	// Control is a controller's control socket (controller add,
	// controller control); omitted when empty, as before it.
	Control string `cbor:"control,omitempty"`
	// Approvals is an approvals operation's request (approvals.go).
	Approvals *ApprovalsRequest `cbor:"approvals,omitempty"`
	// Mark is the snapshot's mark a history archive goes up to.
	Mark *journal.Mark `cbor:"mark,omitempty"`
}

// Grant is an views.GrantSpec with times in unix ms (for CBOR).
type Grant struct {
	Controller     string   `cbor:"controller"`
	Application    string   `cbor:"application"`
	Operations     []string `cbor:"operations"`
	Price          uint64   `cbor:"price"`
	DiscoveryPrice uint64   `cbor:"discoveryPrice"`
	RefusalPrice   uint64   `cbor:"refusalPrice,omitempty"`
	PerDay         uint64   `cbor:"perDay"`
	NotBefore      int64    `cbor:"notBefore"`
	NotAfter       int64    `cbor:"notAfter"`
}

// Reply is the result of an Request; one member is set.
type Reply struct {
	Controller *views.ControllerView `cbor:"controller"`
	Purse      *views.PurseView      `cbor:"purse"`
	Grant      *views.GrantView      `cbor:"grant"`
	Route      *views.RouteView      `cbor:"route"`
	Attempts   []views.AttemptView   `cbor:"attempts"`
	// AttemptsLeftOff counts the earlier attempts a list left off.
	AttemptsLeftOff int                `cbor:"attemptsLeftOff"`
	Attempt         *views.AttemptView `cbor:"attempt"`
	Agent           *views.AgentView   `cbor:"agent"`
	// RouteUnchanged says a route activation or deactivation found the
	// route in that state already: nothing was journaled.
	RouteUnchanged bool `cbor:"routeUnchanged,omitempty"`
	// ControlUnchanged says a controller control named the controller's
	// control socket already: nothing was journaled.
	ControlUnchanged bool `cbor:"controlUnchanged,omitempty"`
	// ControlListened says a controller add or control ran on the running
	// host, which listens on the control socket from now on; false when it
	// ran on the store, which the host listens on when it starts.
	ControlListened bool `cbor:"controlListened,omitempty"`
	// Approvals is an approvals operation's answer (approvals.go).
	Approvals *ApprovalsReply `cbor:"approvals,omitempty"`
	// Snapshot is the file a history snapshot wrote; Mark the newest
	// snapshot's mark (also when none was written), nil when there is none.
	Snapshot string        `cbor:"snapshot,omitempty"`
	Mark     *journal.Mark `cbor:"mark,omitempty"`
	// Archived is what a history archive moved out of the journal.
	Archived *journal.Archived `cbor:"archived,omitempty"`
	// Clock is what a clock accept did.
	Clock *views.ClockView `cbor:"clock,omitempty"`
}

// The operations of route states: Request.Name is the route, Request.By
// who asks.
const (
	OpRouteActivate   = "route-activate"
	OpRouteDeactivate = "route-deactivate"
	OpRouteRemove     = "route-remove"
)

// routeOpState is the state each route operation asks for.
var routeOpState = map[string]hostlog.RouteState{
	OpRouteActivate: hostlog.RouteActive, OpRouteDeactivate: hostlog.RouteInactive, OpRouteRemove: hostlog.RouteRemoved,
}

// OpHistorySnapshot makes a snapshot of the store's state now (`history
// snapshot`): Reply.Snapshot names it, "" when nothing was recorded since
// the last one.
const OpHistorySnapshot = "history-snapshot"

// OpHistoryArchive moves the journal's segments before Request.Mark, a
// snapshot's, into the new archive directory Request.Name (absolute)
// (`history archive`, which exported and verified their receipts first):
// Reply.Archived says what moved.
const OpHistoryArchive = "history-archive"

// OpAgentSet is the operation of `agent set`: Request.Agent.
const OpAgentSet = "agent-set"

// OpClockAccept is the operation of `clock accept`: the store accepts its
// wall clock, behind the latest time it recorded (Reply.Clock).
const OpClockAccept = "clock-accept"
