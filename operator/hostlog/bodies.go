package hostlog

import (
	"bytes"
	"fmt"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// RouteState is a route's state as its records name it: whether the host
// serves it. Only an active route's forward socket is listened on and only
// an active route is in a controller's route table; an inactive one keeps
// its name, its history and its forward socket and may be activated
// again; a removed one is gone for good (its name stays taken, its forward
// socket is free).
type RouteState string

// The route states.
const (
	RouteActive   RouteState = "active"
	RouteInactive RouteState = "inactive"
	RouteRemoved  RouteState = "removed"
)

// The body types, one a kind (freeze and thaw share Purse). Each doc
// comment says what the record means; doc.go lists each kind with its keys.

// ControllerAdd pins a controller: its name, account and role keys
// (msg.ControllerKeys CBOR). Version 1 of ControllerAddV2.
type ControllerAdd struct {
	Name string `cbor:"name"`
	UID  uint32 `cbor:"uid"`
	Keys []byte `cbor:"keys"`
}

// Upgrade is a controller-add record as a controller-add.v2 with no
// control socket: `controller control` gives it one.
func (r *ControllerAdd) Upgrade() *ControllerAddV2 {
	return &ControllerAddV2{Name: r.Name, UID: r.UID, Keys: r.Keys}
}

// ControllerAddV2 is a controller-add with the controller's control
// socket.
type ControllerAddV2 struct {
	Name    string `cbor:"name"`
	UID     uint32 `cbor:"uid"`
	Keys    []byte `cbor:"keys"`
	Control string `cbor:"control"`
}

// ControllerControl sets a controller's control socket.
type ControllerControl struct {
	Controller string `cbor:"controller"`
	Control    string `cbor:"control"`
}

// PurseFund adds Amount credits to a controller's purse.
type PurseFund struct {
	Controller string `cbor:"controller"`
	Amount     uint64 `cbor:"amount"`
	Ledger     uint64 `cbor:"ledger"`
}

// Purse freezes or thaws a controller's purse (purse-freeze, purse-thaw).
type Purse struct {
	Controller string `cbor:"controller"`
}

// GrantIssue stores an operator-signed grant (msg.Grant, COSE_Sign).
type GrantIssue struct {
	Grant []byte `cbor:"grant"`
}

// GrantRevoke revokes a grant.
type GrantRevoke struct {
	ID string `cbor:"id"`
}

// RouteRegister stores a signed route revision (msg.RouteRecord);
// version 1 of RouteRegisterV2: its route is active.
type RouteRegister struct {
	Record []byte `cbor:"record"`
}

// Reserve is the reservation and mark-send of one attempt; version 1 of
// ReserveV2, without the request bytes.
type Reserve struct {
	Attempt       string `cbor:"attempt"`
	Controller    string `cbor:"controller"`
	Grant         string `cbor:"grant"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	Kind          string `cbor:"kind"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Charge        uint64 `cbor:"charge"`
	Consent       []byte `cbor:"consent"`
	Day           int64  `cbor:"day"`
	Ledger        uint64 `cbor:"ledger"`
}

// NotSent releases the reservation of an attempt whose delivery failed
// before its first byte; version 1 of NotSentV2, with no receipt.
type NotSent struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
	Ledger  uint64 `cbor:"ledger"`
}

// Upgrade reads a version 1 not-sent record as version 2: it carries no
// receipt (the hosts that wrote it signed none for this end).
func (b *NotSent) Upgrade() *NotSentV2 {
	return &NotSentV2{Attempt: b.Attempt, Detail: b.Detail, Ledger: b.Ledger}
}

// NotSentV2 releases the reservation of an attempt whose delivery
// failed before its first byte and carries the receipt of that end
// (Outcome not-sent, charge 0, Reason the detail).
type NotSentV2 struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"`
	Ledger  uint64 `cbor:"ledger"`
}

// Uncertain says delivery failed after the first byte: the attempt keeps
// its reservation.
type Uncertain struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
}

// Outcome is an application's answer and its receipt; version 1 of
// OutcomeV2, which charged the whole reservation.
type Outcome struct {
	Attempt string `cbor:"attempt"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"` // the receipt's Seq, so Open need not parse it
	Ledger  uint64 `cbor:"ledger"`
}

// Upgrade reads a version 1 outcome as version 2: it charged the whole
// reservation (charge) and moved no balance, so its ledger number is the
// one current when its receipt was signed, not one of its own.
func (b *Outcome) Upgrade(charge uint64) *OutcomeV2 {
	return &OutcomeV2{Attempt: b.Attempt, Status: b.Status, Body: b.Body, Receipt: b.Receipt,
		Seq: b.Seq, Charge: charge, Ledger: b.Ledger}
}

// OutcomeV2 is an application's answer, the charge it settled (the
// reservation for a 2xx, the refusal price or nothing otherwise: the rest
// of the reservation is released) and the signed receipt, one record. Its
// ledger number is its own: the release moves the balance (by 0 when the
// whole reservation is charged).
type OutcomeV2 struct {
	Attempt string `cbor:"attempt"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"`
	Charge  uint64 `cbor:"charge"`
	Ledger  uint64 `cbor:"ledger"`
}

// Refused ends an admitted attempt that was refused before anything
// was reserved (the payer refused, its consent could not be obtained, or
// the last-moment check refused): nothing was sent or charged. It carries
// the receipt (Outcome refused, charge 0, Reason) and the ledger number
// current when it was signed (it moves no balance).
type Refused struct {
	Attempt    string `cbor:"attempt"`
	Controller string `cbor:"controller"`
	Reason     string `cbor:"reason"`
	Receipt    []byte `cbor:"receipt"`
	Seq        uint64 `cbor:"receiptSeq"`
	Ledger     uint64 `cbor:"ledger"`
	// Agent and Conversation are the dispatch's, when it named an agent
	// (the receipt names them too): inspect and attempts list show them
	// after a restart.
	Agent        string `cbor:"agent,omitempty"`
	Conversation string `cbor:"conversation,omitempty"`
}

// Checkpoint is a signed msg.Checkpoint over the durable receipt chain
// head; Seq is the receipt it covers.
type Checkpoint struct {
	Checkpoint []byte `cbor:"checkpoint"`
	Seq        uint64 `cbor:"seq"` // the receipt sequence it covers
}

// RouteRegisterV2 is a signed route revision with who registered it
// and when, and the route's state once it is registered: active or
// inactive for a new route (`route register --inactive`), the route's own
// state for a later revision (a new revision keeps it). A first-version
// route-register has none of these: its route is active.
type RouteRegisterV2 struct {
	Record []byte     `cbor:"record"`
	State  RouteState `cbor:"state"`
	By     string     `cbor:"by"`
	At     int64      `cbor:"at"` // unix ms, by the store's clock
}

// RouteStateChange is an operator's change of a route's state (`route
// activate|deactivate|remove`): the state it enters, who ("uid:N") and
// when (unix ms, by the store's clock).
type RouteStateChange struct {
	Route string     `cbor:"route"`
	State RouteState `cbor:"state"`
	By    string     `cbor:"by"`
	At    int64      `cbor:"at"`
}

// ReserveV2 is a reservation that keeps the exact request (method,
// path, body; the body at most the invocation bound, as the checked
// dispatch holds it), so that an operator can redeliver the attempt. Its
// other fields are Reserve's, embedded: CBOR flattens them, so the
// body's keys are Reserve's and then these.
type ReserveV2 struct {
	Reserve
	Method string `cbor:"method"`
	Path   string `cbor:"path"`
	Body   []byte `cbor:"body"`
	// Agent is the dispatch's agent and Conversation its invoke body's
	// conversationId, omitted when empty (added in place: no host wrote
	// reserve.v2 before them). Replay counts the agent's limits by them.
	Agent        string `cbor:"agent,omitempty"`
	Conversation string `cbor:"conversation,omitempty"`
}

// V1 is the reservation without its request: what replay and the audit
// of the first version read.
func (b *ReserveV2) V1() *Reserve { return &b.Reserve }

// Upgrade reads a first-version reservation as a reserve.v2 with no
// request: such an attempt can be released or charged, not redelivered.
func (b *Reserve) Upgrade() *ReserveV2 { return &ReserveV2{Reserve: *b} }

// HasRequest reports whether the reservation kept its request bytes.
func (b *ReserveV2) HasRequest() bool { return b.Method != "" }

// Request is the kept request.
func (b *ReserveV2) Request() oracleops.Request {
	return oracleops.Request{Method: b.Method, Path: b.Path, Body: b.Body}
}

// Redeliver is journaled before each redelivery an operator asks for,
// one a command, before the first byte is sent: who asked and why. The
// outcome that follows is an ordinary outcome record (or an uncertain one).
type Redeliver struct {
	Attempt string `cbor:"attempt"`
	By      string `cbor:"by"`
	Reason  string `cbor:"reason"`
}

// Resolve ends an uncertain attempt by the operator's word, with its
// signed receipt: State msg.StateReleased (not performed: the reservation
// is released, charge 0) or msg.StatePerformed (performed, no answer
// recorded: the reservation is settled). Ledger is the release's ledger
// number, or the one current when a settling receipt was signed.
type Resolve struct {
	Attempt string    `cbor:"attempt"`
	State   msg.State `cbor:"state"`
	By      string    `cbor:"by"`
	Reason  string    `cbor:"reason"`
	Receipt []byte    `cbor:"receipt"`
	Seq     uint64    `cbor:"receiptSeq"`
	Ledger  uint64    `cbor:"ledger"`
}

// CheckRequest checks that a reservation's request bytes are the
// request its hash names.
func (b *ReserveV2) CheckRequest() error {
	if !b.HasRequest() {
		return fmt.Errorf("a reserve.v2 record without its request")
	}
	if sum := b.Request().SHA256(); !bytes.Equal(sum[:], b.RequestSHA256) {
		return fmt.Errorf("the kept request does not hash to the reservation's request hash")
	}
	return nil
}

// AgentLimits is the body of an agent-limits record.
type AgentLimits struct {
	Limits []byte `cbor:"limits"` // signed msg.AgentLimits (COSE_Sign)
}

// Ask raises an ask: the call it stands for (the canonical request
// bytes, which hash to requestSha256 and carry the arguments), what it
// would cost, and the policy's terms as they were when it was raised.
type Ask struct {
	Ask            string      `cbor:"ask"`
	Attempt        string      `cbor:"attempt"`
	Controller     string      `cbor:"controller"`
	Route          string      `cbor:"route"`
	Agent          string      `cbor:"agent"`
	Conversation   string      `cbor:"conversation,omitempty"`
	Application    string      `cbor:"application"`
	Operation      string      `cbor:"operation"`
	Kind           string      `cbor:"kind"`
	RequestSHA256  []byte      `cbor:"requestSha256"`
	Method         string      `cbor:"method"`
	Path           string      `cbor:"path"`
	Body           []byte      `cbor:"body"`
	Price          uint64      `cbor:"price"`
	Justification  string      `cbor:"justification,omitempty"`
	RaisedAt       int64       `cbor:"raisedAt"`
	ExpiresAt      int64       `cbor:"expiresAt"`
	ParkMs         int64       `cbor:"parkMs"`
	OnTimeout      msg.Verdict `cbor:"onTimeout"`
	LimitsRevision uint64      `cbor:"limitsRevision"`
	// Day is the UTC day whose calls of the agent the ask counts one of
	// (omitted: an ask recorded before asks counted calls, which counts
	// none, as it did).
	Day int64 `cbor:"day,omitempty"`
	// AgentUID is the asking session's account ("uid:N", the dispatch's
	// AgentUID), whose human answers are refused; absent from asks raised
	// before it and from a controller that does not send it.
	AgentUID string `cbor:"agentUid,omitempty"`
	// ConversationName is the agent's own name of Conversation (the
	// dispatch's, checked to scope to it); absent from asks before it.
	ConversationName string `cbor:"conversationName,omitempty"`
}

// AskAnswer decides an ask: approve or deny, by a human ("uid:N",
// with its account name) or an advisor ("agent:NAME", advisor its name),
// with the human's note or the advisor's sentence.
type AskAnswer struct {
	Ask     string      `cbor:"ask"`
	Verdict msg.Verdict `cbor:"verdict"`
	By      string      `cbor:"by"`
	Account string      `cbor:"account,omitempty"`
	Advisor string      `cbor:"advisor,omitempty"`
	Note    string      `cbor:"note,omitempty"`
	At      int64       `cbor:"at"`
	// CollectBy is an approval's collect window's end (unix ms, the
	// store's clock): past it, uncollected, the ask lapses to its
	// on-timeout verdict (ask-lapsed). Set on an approval of an ask whose
	// on-timeout verdict is deny; absent on a denial, on an approval of an
	// ask that would expire to approve, and on approvals recorded before
	// collect windows (those get theirs from an ask-window record).
	CollectBy int64 `cbor:"collectBy,omitempty"`
}

// AskExpired decides an unanswered ask at its expiry with the
// policy's on-timeout verdict.
type AskExpired struct {
	Ask     string      `cbor:"ask"`
	Verdict msg.Verdict `cbor:"verdict"`
	At      int64       `cbor:"at"`
}

// AnsweredByExpiry is who decided an ask that expired unanswered, as
// the receipts of its attempt name it (AnsweredBy).
const AnsweredByExpiry = "expiry"
