package ledger

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Journal identity of the controller journal.
const (
	JournalOwner  = "steward-controller"
	JournalFormat = "steward-controller-journal-v1"
)

// Record kinds of the controller journal (see the package doc).
const (
	KindBegin   = "begin"
	KindResult  = "result"
	KindResolve = "resolve"
	// KindResolveV2 is what the controller writes now (ResolveV2); resolve
	// records of the first version still read.
	KindResolveV2 = "resolve.v2"
	KindFgSubmit  = "fg-submit"
	KindFgResult  = "fg-result"
	KindFgAck     = "fg-ack"
	// KindAwaiting and KindConsented are an attempt on an operation marked
	// for approval: the host's ask it waits on, and the consent this
	// controller gave it once approved (journaled before the consent
	// leaves), so that a restart knows whether it may still consent.
	KindAwaiting  = "awaiting"
	KindConsented = "consented"
)

// Begin is journaled before anything of a call is sent. Method, Path and
// Body are the exact request; everything the host admits it by (operation,
// requestId, the arguments inside an invoke body) is derived from them.
type Begin struct {
	Attempt     string `cbor:"attempt"`
	Tool        string `cbor:"tool"`
	Application string `cbor:"application"`
	Operation   string `cbor:"operation"`
	// RequestID is the agent's requestId, as it wrote it: what its later
	// calls are matched by, with its agent and the application.
	RequestID      string `cbor:"requestId"`
	ConversationID string `cbor:"conversationId"`
	// Arguments is present only in begins written before the body became
	// the one copy of a call's arguments (the v1 golden journal); it is
	// read and never written.
	Arguments     []byte `cbor:"arguments,omitempty"`
	Kind          string `cbor:"kind"`
	Method        string `cbor:"method"`
	Path          string `cbor:"path"`
	Body          []byte `cbor:"body"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Route         string `cbor:"route"`
	Foreground    string `cbor:"foreground"` // the foreground request id, "" for MCP
	// Principal is who made the call, from the kernel: "uid:N" for the
	// peer of an MCP session, "foreground" for the foreground socket.
	// Begins written before the payer policy have none.
	Principal string `cbor:"principal,omitempty"`
	// Day is the UTC day (days since the Unix epoch, of the controller's
	// clock, never earlier than the latest day recorded before it) whose
	// payer budget the call counts against. Absent in older begins.
	Day int64 `cbor:"day,omitempty"`
	// Deadline is the dispatch's deadline (unix ms, the controller's
	// clock): when the agent stops waiting and the host stops delivering.
	// Absent in begins written before deadlines.
	Deadline int64 `cbor:"deadline,omitempty"`
	// Agent is the agent that made the call (its configured name, "uid:N"
	// for a peer the legacy allow-list admits, "foreground"), from the
	// kernel: the dispatch carries it and the consent names it (Principal
	// is the same name, the payer's). Absent in begins written before
	// agents: those belong to the principal they recorded (Owner).
	Agent string `cbor:"agent,omitempty"`
	// ScopedRequestID is the requestId the application sees, derived from
	// the agent and RequestID (the invoke body carries it): absent for a
	// discovery and in begins written before agents, whose body carries
	// RequestID itself.
	ScopedRequestID string `cbor:"scopedRequestId,omitempty"`
	// ScopedConversationID is the conversationId the application sees,
	// derived from the agent and ConversationID (the invoke body carries
	// it): absent for a discovery and in begins written before it, whose
	// body carries ConversationID itself.
	ScopedConversationID string `cbor:"scopedConversationId,omitempty"`
	// Justification is the agent's own short reason for the call (at most
	// msg.MaxJustification bytes, one line), sent in the dispatch and
	// shown to whoever answers its ask. Absent when the agent gave none.
	Justification string `cbor:"justification,omitempty"`
}

// Owner is the agent a begin belongs to, whose later calls it decides:
// its Agent, or for a begin written before agents the principal it
// recorded ("uid:N" or "foreground"), or "" for one written before
// principals, which belongs to no agent and decides no later call (its
// requestId reached the application unscoped, and every later call sends
// a scoped one, so the application cannot confuse them either).
func (b *Begin) Owner() string {
	if b.Agent != "" {
		return b.Agent
	}
	return b.Principal
}

// AppConversationID is the conversationId the begin's body carries, which
// the host reads and signs into its receipt: the scoped one, or for a
// begin written before it, the agent's own.
func (b *Begin) AppConversationID() string {
	if b.ScopedConversationID != "" {
		return b.ScopedConversationID
	}
	return b.ConversationID
}

// Result is journaled when a dispatch ends with an answer or a refusal.
// Receipt is the host-signed receipt from the dispatch reply.
type Result struct {
	Attempt string       `cbor:"attempt"`
	Outcome msg.State    `cbor:"outcome"`
	Status  int          `cbor:"status"`
	Body    []byte       `cbor:"body"`
	Receipt []byte       `cbor:"receipt"`
	Refusal *msg.Refusal `cbor:"refusal"`
	Detail  string       `cbor:"detail"`
	// Charge is the verified receipt's charge; Consented what the payer
	// consented to at most (0 without a consent). The day's spending
	// counts Charge when there is a receipt and Consented otherwise.
	// Absent in results written before the payer policy.
	Charge    uint64 `cbor:"charge,omitempty"`
	Consented uint64 `cbor:"consented,omitempty"`
	// CallPrice is the host's price of an invoke of what a discovery
	// showed (msg.DispatchResult.CallPrice); absent for invokes and in
	// results written before it.
	CallPrice *uint64 `cbor:"callPrice,omitempty"`
	// Ask and AnsweredBy are the verified receipt's: the ask an attempt on
	// an operation marked for approval went through, and who decided it.
	// Absent for every other attempt.
	Ask        string `cbor:"ask,omitempty"`
	AnsweredBy string `cbor:"answeredBy,omitempty"`
}

// Spent is what a result counts against its principal's day.
func (r *Result) Spent() uint64 {
	if r.Receipt != nil {
		return r.Charge
	}
	return r.Consented
}

// Resolve settles an attempt that was left uncertain, from what the host
// reported. State is msg.StateDefinite (it carries the host's answer),
// msg.StateAbandoned or msg.StateReleased.
type Resolve struct {
	Attempt string    `cbor:"attempt"`
	State   msg.State `cbor:"state"`
	By      string    `cbor:"by"`
	Status  int       `cbor:"status"`
	Body    []byte    `cbor:"body"`
	Receipt []byte    `cbor:"receipt"`
	Detail  string    `cbor:"detail"`
	Charge  uint64    `cbor:"charge,omitempty"` // the verified receipt's charge
}

// ResolveV2 is Resolve with the operator's resolution on the host: a
// record's new fields make a new kind, since bodies decode strictly.
// State is also msg.StateReleased with ResolvedBy set (the operator stated
// it was not performed: the requestId answers a refusal, nothing charged)
// or msg.StatePerformed (the operator stated it was performed: charged,
// its answer never recorded). ResolvedBy and Reason are the receipt's:
// who resolved it on the host ("uid:N") and why.
type ResolveV2 struct {
	Attempt    string    `cbor:"attempt"`
	State      msg.State `cbor:"state"`
	By         string    `cbor:"by"`
	Status     int       `cbor:"status"`
	Body       []byte    `cbor:"body"`
	Receipt    []byte    `cbor:"receipt"`
	Detail     string    `cbor:"detail"`
	Charge     uint64    `cbor:"charge,omitempty"`
	ResolvedBy string    `cbor:"resolvedBy,omitempty"`
	Reason     string    `cbor:"reason,omitempty"`
}

// upgrade reads a first-version resolve as a ResolveV2.
func (r *Resolve) upgrade() ResolveV2 {
	return ResolveV2{Attempt: r.Attempt, State: r.State, By: r.By, Status: r.Status, Body: r.Body,
		Receipt: r.Receipt, Detail: r.Detail, Charge: r.Charge}
}

// ByOperator reports a resolution the host's operator decided (released or
// performed on the host), which answers the attempt's requestId from then on.
func (r *ResolveV2) ByOperator() bool { return r.ResolvedBy != "" && r.State != msg.StateDefinite }

// Awaiting is journaled when the host answers a dispatch awaiting approval:
// the attempt's ask, raised and journaled by the host, and when it expires
// (unix ms, the host's clock) to its on-timeout verdict. From it on the
// attempt is not uncertain after a restart but awaiting approval: nothing
// of it was reserved or delivered, and it may be consented to once.
type Awaiting struct {
	Attempt   string `cbor:"attempt"`
	Ask       string `cbor:"ask"`
	ExpiresAt int64  `cbor:"expiresAt"`
}

// Consented is journaled before the controller's consent to the reserve of
// an attempt that has an Awaiting record leaves it (and only then: an
// attempt never marked for approval gets no record, and no fsync, of its
// consent). ConsentSHA256 is the SHA-256 of the signed consent, Amount the
// most it allows (the larger of its charge and refusal price): after a
// restart the attempt is uncertain and counts that much for its day.
type Consented struct {
	Attempt       string `cbor:"attempt"`
	ConsentSHA256 []byte `cbor:"consentSha256"`
	Amount        uint64 `cbor:"amount"`
}

// FgSubmit is journaled when a foreground request is accepted.
type FgSubmit struct {
	ID        string `cbor:"id"`
	Tool      string `cbor:"tool"`
	Arguments []byte `cbor:"arguments"`
}

// FgResult keeps a foreground request's result until acknowledged.
type FgResult struct {
	ID     string `cbor:"id"`
	Result []byte `cbor:"result"` // the tool's result as JSON
}

// FgAck forgets a foreground result.
type FgAck struct {
	ID string `cbor:"id"`
}

// Decode decodes a record's body strictly into v, naming the record on
// failure.
func Decode(r journal.Record, v any) error {
	if err := wire.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("journal record %d (%s): %w", r.Seq, r.Kind, err)
	}
	return nil
}
