package msg

import "time"

// Dispatch kinds: what the controller asks the host to deliver.
const (
	KindList     = "list"     // GET PREFIX/operations?...
	KindDescribe = "describe" // GET PREFIX/operations/ID
	KindInvoke   = "invoke"   // POST PREFIX/invoke
)

// Dispatch asks the host to admit and deliver one request to an
// application: the route's, whose forward socket it arrives on. The
// controller has journaled `begin` for Attempt before sending it. The
// request bytes are all it carries: the host derives the kind, operation,
// search text and request hash from them (checking that they are the one
// canonical request of the protocol), so nothing in the frame can disagree
// with what is delivered.
type Dispatch struct {
	Attempt string `cbor:"attempt"`
	Method  string `cbor:"method"`
	Path    string `cbor:"path"` // includes the route's prefix and query string
	Body    []byte `cbor:"body"`
	// Deadline is when the agent stops waiting, unix ms by the controller's
	// clock: the host refuses a dispatch past it before reserving anything
	// and never delivers past it. Absent from controllers before it.
	Deadline int64 `cbor:"deadline,omitempty"`
	// Agent is the principal that made the call, as the controller knows
	// it from the kernel (SO_PEERCRED of the MCP session, mapped to the
	// agent's configured name; "foreground" for the foreground socket).
	// The host counts the operator's limits for that agent by it, refuses
	// a dispatch whose payer consent names another principal, and signs it
	// into the receipt. Absent from controllers before agents.
	Agent string `cbor:"agent,omitempty"`
	// AgentUID is the account of the MCP session that made the call,
	// "uid:N" from SO_PEERCRED (the controller's word: the host cannot see
	// that peer). The host carries it into a call's ask and refuses a
	// human answer from that account, so that an account in both the
	// agents' and the approvers' group never approves its own call.
	// Omitted by the foreground socket and by controllers before it.
	AgentUID string `cbor:"agentUid,omitempty"`
	// ConversationName is an invoke's conversationId as the agent named
	// it: the body carries its scoped form
	// (oracleops.ScopedConversationID of Agent and it), which the host
	// recomputes to check this against, and shows this to approvers and
	// advisors instead of the opaque scoped id. Omitted when the call
	// names no conversation, and by controllers before it.
	ConversationName string `cbor:"conversationName,omitempty"`
	// Justification is the agent's own short reason for a call to an
	// operation marked for approval (at most MaxJustification bytes, one
	// line): shown with the ask, never delivered to the application.
	// Omitted when empty.
	Justification string `cbor:"justification,omitempty"`
	DispatchV1
}

// DeadlineTolerance is how far the host's clock may read past a dispatch's
// Deadline (the controller's clock) before the deadline counts as passed:
// the host refuses a dispatch only once its clock is more than
// DeadlineTolerance past the deadline, and stops its delivery at the
// deadline plus DeadlineTolerance; the controller waits for the host's
// answer until the deadline plus twice DeadlineTolerance (the host's
// clock may be that much behind its own, and the answer must still
// arrive). Both daemons run on one machine and read one wall clock, so
// the tolerance only covers the dispatch's transit and the two reads: 2 s
// is far above that and far below any timeout an agent would ask for.
const DeadlineTolerance = 2 * time.Second

// DispatchV1 holds the fields the first version of Dispatch also carried,
// each a copy of what the route or the request bytes say. A dispatch from
// an older controller is still read; the fields are never sent now and
// never used.
type DispatchV1 struct {
	Application    string `cbor:"application,omitempty"`
	Kind           string `cbor:"kind,omitempty"`
	Operation      string `cbor:"operation,omitempty"`
	Query          string `cbor:"query,omitempty"`
	RequestSHA256  []byte `cbor:"requestSha256,omitempty"`
	RequestID      string `cbor:"requestId,omitempty"`
	ConversationID string `cbor:"conversationId,omitempty"`
}

// State is where an attempt stands, in the one vocabulary the controller,
// the host and the wire share: each word has one name. A dispatch's
// outcome is the state it ended in (StateDefinite, StateRefused,
// StateNotSent or StateUncertain); the host reports its own view of an
// attempt to inspect (StateNotSeen, StateDeliveryRequested, StateNotSent,
// StateDefinite, StateUncertain); the controller adds StatePending while
// a call is in flight and the two states a resolution leaves.
type State string

// Attempt states.
const (
	// StateNotSeen: the host has nothing durable of the attempt.
	StateNotSeen State = "not-seen"
	// StatePending: begun by this controller process, the dispatch in flight.
	StatePending State = "pending"
	// StateDeliveryRequested: the host reserved and marked it sent (or
	// being sent), and has no outcome yet.
	StateDeliveryRequested State = "delivery-requested"
	// StateDefinite: the application answered; the status and body are its
	// answer, refusals included.
	StateDefinite State = "definite"
	// StateRefused: steward refused before anything was sent.
	StateRefused State = "refused"
	// StateNotSent: delivery failed before the first byte; released.
	StateNotSent State = "not-sent"
	// StateUncertain: sending may have begun and no answer was recorded.
	StateUncertain State = "uncertain"
	// StateAbandoned: resolved after the host said it never saw the attempt.
	StateAbandoned State = "abandoned"
	// StateReleased: the reservation was released with nothing charged:
	// on the controller, resolved after the host said it recorded the
	// attempt not sent; on the host, the operator stated the request was
	// not performed (steward-operator attempts resolve --release).
	StateReleased State = "released"
	// StatePerformed: the operator stated the request was performed and
	// no answer was recorded (attempts resolve --charge); it is charged.
	StatePerformed State = "performed"
)

// DispatchResult is the host's answer to a Dispatch. A definite outcome keeps
// the application's own status and body, refusals included.
type DispatchResult struct {
	Attempt string   `cbor:"attempt"`
	Outcome State    `cbor:"outcome"`
	Status  int      `cbor:"status"`
	Body    []byte   `cbor:"body"`
	Receipt []byte   `cbor:"receipt"` // COSE_Sign1 over a Receipt; nil unless definite
	Refusal *Refusal `cbor:"refusal"` // set when Outcome is refused
	Detail  string   `cbor:"detail"`  // one line on a not-sent or uncertain outcome
	// CallPrice, on a definite discovery (list or describe), is what an
	// invoke of the operations it shows costs under the grant that
	// admitted it: the agent sees the price before it calls. Absent
	// otherwise, and from hosts before it.
	CallPrice *uint64 `cbor:"callPrice,omitempty"`
	// Ask, on an outcome of StateAwaitingApproval, is the ask the host
	// journaled for the attempt (approval.go). Absent otherwise.
	Ask *AskTicket `cbor:"ask,omitempty"`
}

// Inspect asks the host what it recorded of one attempt.
type Inspect struct {
	Attempt string `cbor:"attempt"`
}

// InspectResult is the host's durable record of one attempt.
type InspectResult struct {
	Attempt string `cbor:"attempt"`
	State   State  `cbor:"state"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Detail  string `cbor:"detail"`
	// RedeliveredBy, after an operator's redelivery, is who asked for it
	// ("uid:N", the host's last redeliver record): the resolver the
	// answer's receipt names. Omitted otherwise.
	RedeliveredBy string `cbor:"redeliveredBy,omitempty"`
	// Ask, for an attempt awaiting approval, is its ask's ticket: a
	// controller that never received the dispatch's answer (the host died
	// after journaling the ask) learns the ask from it and collects. Omitted
	// otherwise.
	Ask *AskTicket `cbor:"ask,omitempty"`
	// Refusal, for an attempt its ask's denial ended (state refused), is
	// the denial its collect answers (code CodeDenied): a controller that
	// lost the answer records it as the denial it is, which then decides
	// the requestId. Omitted otherwise.
	Refusal *Refusal `cbor:"refusal,omitempty"`
}
