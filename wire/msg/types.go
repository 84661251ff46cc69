package msg

// Frame types. A request of type X is answered by the type named beside it,
// or by TypeRefused.
const (
	TypeDispatch       = "dispatch"
	TypeDispatchResult = "dispatch-result"
	TypeInspect        = "inspect"
	TypeInspectResult  = "inspect-result"
	TypeReserve        = "reserve"
	TypeConsent        = "consent"
	TypeRefused        = "refused"
	// TypeAllowance asks the host what an agent may still spend under the
	// operator's limits (Allowance, answered by TypeAllowanceResult).
	TypeAllowance       = "allowance"
	TypeAllowanceResult = "allowance-result"
)

// Roles announced in the wire hello and bound into the channel id.
const (
	RoleHost               = "host"
	RoleControllerTool     = "controller-tool"
	RoleControllerDispatch = "controller-dispatch"
)

// Channel purposes.
const (
	PurposeDispatch = "dispatch"
	PurposeCustody  = "custody"
)

// Refusal answers a request that was refused. Reason is one line naming what
// was refused and why; Code is a stable machine-readable word.
type Refusal struct {
	Code   string `cbor:"code"`
	Reason string `cbor:"reason"`
}

// Refusal codes.
const (
	CodeNoGrant      = "no-grant"     // no grant covers this application and operation
	CodeFrozen       = "frozen"       // the purse is frozen
	CodeInsufficient = "insufficient" // balance below the charge
	CodeDailyLimit   = "daily-limit"  // the grant's daily count is spent
	CodeNoConsent    = "no-consent"   // the controller refused or failed to consent
	CodeDuplicate    = "duplicate"    // this attempt id was already dispatched
	CodeBadRequest   = "bad-request"  // the request failed validation
	CodeJournal      = "journal"      // a journal append failed; nothing was done
	CodeUnknown      = "unknown"      // the attempt is not known
	CodeInternal     = "internal"     // an internal fault; nothing was sent
	CodeConflict     = "conflict"     // same request id, different arguments
	CodeUncertain    = "uncertain"    // an earlier attempt is uncertain
	CodeUnavailable  = "unavailable"  // the route or application cannot be reached
	CodePayerLimit   = "payer-limit"  // the controller's payer policy refused the charge
	// CodeDeadlinePassed: the dispatch's deadline passed before the host
	// could deliver it; nothing was reserved or charged.
	CodeDeadlinePassed = "deadline-passed"
	// CodeAgentLimit: an operator's limit for this agent refused the call
	// (an operation it may not call, a daily, conversation or rate limit).
	CodeAgentLimit = "agent-limit"
	// CodeArchived: the attempt's records were archived out of the host's
	// journal (`steward-operator history archive`); the reason names the
	// archive that holds them.
	CodeArchived = "archived"
)

func (r *Refusal) Error() string { return r.Code + ": " + r.Reason }
