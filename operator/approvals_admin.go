package operator

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stewardrt/steward/wire/msg"
)

// The approvals operations (DESIGN.md section 9, "Approvals"): what
// `steward-operator approvals` asks of the running host, on its admin
// socket (the host's own account) or on the approvals socket (an
// approver's). They read and answer the host store's asks (ask_list.go,
// ask_answer.go); who answers is never the request's word: the host sets
// By ("uid:N") and Account from the connection's SO_PEERCRED.
const (
	OpApprovalsList    = "approvals-list"
	OpApprovalsShow    = "approvals-show"
	OpApprovalsRespond = "approvals-respond"
	OpApprovalsEvents  = "approvals-events"
)

// isApprovalsOp reports whether op is one of the approvals operations:
// the only ones the approvals socket serves.
func isApprovalsOp(op string) bool {
	switch op {
	case OpApprovalsList, OpApprovalsShow, OpApprovalsRespond, OpApprovalsEvents:
		return true
	}
	return false
}

// ApprovalsRequest is an approvals operation's AdminRequest.Approvals.
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
	// wait for one when there is none yet (at most maxEventsWait).
	After  uint64 `cbor:"after,omitempty"`
	WaitMs int64  `cbor:"waitMs,omitempty"`
	// Account is the answering account's name, set by the host from the
	// connection's SO_PEERCRED (as AdminRequest.By), never the request's.
	Account string `cbor:"account,omitempty"`
}

// checkRespond refuses a respond's verdict other than approve or deny,
// and a note past its bound or of more than one line.
func (r *ApprovalsRequest) checkRespond() error {
	switch {
	case r.Ask == "":
		return refusedf("approvals respond without an ask")
	case r.Verdict != msg.VerdictApprove && r.Verdict != msg.VerdictDeny:
		return refusedf("ask %s: verdict %q: a human answers approve or deny", r.Ask, trunc(string(r.Verdict), 40))
	case len(r.Note) > msg.MaxApprovalNote:
		return refusedf("ask %s: a note of %d bytes, the bound is %d", r.Ask, len(r.Note), msg.MaxApprovalNote)
	case !utf8.ValidString(r.Note) || strings.ContainsAny(r.Note, "\r\n"):
		return refusedf("ask %s: the note must be one line of UTF-8", r.Ask)
	}
	return nil
}

// ApprovalsReply is an approvals operation's AdminReply.Approvals.
type ApprovalsReply struct {
	// Asks are a list's, oldest first, at most msg.MaxAsksListed; LeftOff
	// counts those it left off.
	Asks    []msg.AskView `cbor:"asks,omitempty"`
	LeftOff int           `cbor:"leftOff,omitempty"`
	// Ask is a show's ask, and a respond's as it stands after the answer.
	Ask *msg.AskView `cbor:"ask,omitempty"`
	// Events are an events request's, in journal order, and Cursor the
	// After of the next request (the last event's sequence number, or the
	// request's own After when there was none).
	Events []ApprovalEvent `cbor:"events,omitempty"`
	Cursor uint64          `cbor:"cursor,omitempty"`
}

// ApprovalEvent is one event of an ask, as `approvals watch` prints it:
// raised, answered or expired, when (unix ms) and the ask as it stood then.
type ApprovalEvent struct {
	Event string      `cbor:"event"`
	At    int64       `cbor:"at"`
	Ask   msg.AskView `cbor:"ask"`
}

// maxEventsWait bounds how long one events request waits for an event:
// `approvals watch` asks again at once, so a short bound costs one round
// trip and keeps a connection's request well inside the client's own
// timeout.
const maxEventsWait = 5 * time.Second
