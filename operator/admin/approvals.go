package admin

import (
	"time"

	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The approvals operations (DESIGN.md section 9, "Approvals"): what
// `steward-operator approvals` asks of the running host, on its admin
// socket (the host's own account) or on the approvals socket (an
// approver's). They read and answer the host store's asks; who answers is
// never the request's word: the host sets By ("uid:N") and Account from
// the connection's SO_PEERCRED.
const (
	OpApprovalsList    = "approvals-list"
	OpApprovalsShow    = "approvals-show"
	OpApprovalsRespond = "approvals-respond"
	OpApprovalsEvents  = "approvals-events"
)

// IsApprovalsOp reports whether op is one of the approvals operations:
// the only ones the approvals socket serves.
func IsApprovalsOp(op string) bool {
	switch op {
	case OpApprovalsList, OpApprovalsShow, OpApprovalsRespond, OpApprovalsEvents:
		return true
	}
	return false
}

// ApprovalsRequest is an approvals operation's Request.Approvals.
type ApprovalsRequest struct {
	// Ask names the ask of a show or a respond.
	Ask string `cbor:"ask,omitempty"`
	// All lists every ask a list can show, not only the pending ones.
	All bool `cbor:"all,omitempty"`
	// Verdict and Note are a respond's answer: approve or deny, and at
	// most msg.MaxApprovalNote bytes of one line.
	Verdict msg.Verdict `cbor:"verdict,omitempty"`
	Note    string      `cbor:"note,omitempty"`
	// After is an events request's cursor (the journal sequence number of
	// the last event seen; 0: from the start), and WaitMs how long it may
	// wait for one when there is none yet (at most MaxEventsWait). A list's
	// After is the cursor of the page it asks for (the Cursor of the page
	// before; 0: the first).
	After  uint64 `cbor:"after,omitempty"`
	WaitMs int64  `cbor:"waitMs,omitempty"`
	// Account is the answering account's name, set by the host from the
	// connection's SO_PEERCRED (as Request.By), never the request's.
	Account string `cbor:"account,omitempty"`
}

// CheckRespond refuses a respond without an ask, a verdict other than
// approve or deny, and a note past its bound or of more than one line, as
// the store does (views.CheckAnswer), before anything is sent.
func (r *ApprovalsRequest) CheckRespond() error {
	if r.Ask == "" {
		return views.Refusedf("approvals respond without an ask")
	}
	return views.CheckAnswer(r.Verdict, r.Note)
}

// ApprovalsReply is an approvals operation's Reply.Approvals.
type ApprovalsReply struct {
	// Asks are a list's (operator.Store.AskList).
	Asks []msg.AskView `cbor:"asks,omitempty"`
	// Ask is a show's ask, and a respond's as it stands after the answer.
	Ask *msg.AskView `cbor:"ask,omitempty"`
	// Events are an events request's, in journal order, and Cursor the
	// After of the next request (operator.Store.AskEvents). A list's
	// Cursor is the After of its next page, 0 when it is the last: a list
	// and a batch of events are pages of at most msg.AsksPageBytes.
	Events []views.AskEvent `cbor:"events,omitempty"`
	Cursor uint64           `cbor:"cursor,omitempty"`
}

// MaxEventsWait bounds how long one events request waits for an event:
// `approvals watch` asks again at once, so a short bound costs one round
// trip, keeps a request well inside the client's own timeout, and holds a
// host's shutdown at most this long.
const MaxEventsWait = 5 * time.Second
