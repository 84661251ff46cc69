package operator

import (
	"context"
	"time"

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
// and a note past its bound or of more than one line, as the store does
// (checkAnswer), before anything is sent.
func (r *ApprovalsRequest) checkRespond() error {
	switch {
	case r.Ask == "":
		return refusedf("approvals respond without an ask")
	case r.Verdict != msg.VerdictApprove && r.Verdict != msg.VerdictDeny:
		return refusedf("verdict %q: an answer approves or denies", quoteLine(string(r.Verdict), 20))
	}
	if why := lineWithin("the note", r.Note, 0, msg.MaxApprovalNote); why != "" {
		return refusedf("%s", why)
	}
	return nil
}

// ApprovalsReply is an approvals operation's AdminReply.Approvals.
type ApprovalsReply struct {
	// Asks are a list's (Store.AskList).
	Asks []msg.AskView `cbor:"asks,omitempty"`
	// Ask is a show's ask, and a respond's as it stands after the answer.
	Ask *msg.AskView `cbor:"ask,omitempty"`
	// Events are an events request's, in journal order, and Cursor the
	// After of the next request (Store.AskEvents).
	Events []AskEvent `cbor:"events,omitempty"`
	Cursor uint64     `cbor:"cursor,omitempty"`
}

// maxEventsWait bounds how long one events request waits for an event:
// `approvals watch` asks again at once, so a short bound costs one round
// trip, keeps a request well inside the client's own timeout, and holds a
// host's shutdown at most this long.
const maxEventsWait = 5 * time.Second

// doApprovals runs an approvals operation on the store. A respond is
// answered by req.By and Approvals.Account, which the running host sets
// from the connection's SO_PEERCRED (Host.doAdmin) and a command on the
// store from its own account.
func (s *Store) doApprovals(req AdminRequest) (AdminReply, error) {
	ar := req.Approvals
	if ar == nil {
		return AdminReply{}, refusedf("%s without its request", req.Op)
	}
	var rep ApprovalsReply
	switch req.Op {
	case OpApprovalsList:
		rep.Asks = s.AskList(ar.All)
	case OpApprovalsShow:
		v, err := s.AskShow(ar.Ask)
		if err != nil {
			return AdminReply{}, err
		}
		rep.Ask = &v
	case OpApprovalsRespond:
		if err := ar.checkRespond(); err != nil {
			return AdminReply{}, err
		}
		v, err := s.AnswerAsk(ar.Ask, Answer{Verdict: ar.Verdict, By: req.By, Account: ar.Account, Note: ar.Note})
		if err != nil {
			return AdminReply{}, err
		}
		rep.Ask = &v
	case OpApprovalsEvents:
		// A store a command opened: no shutdown to wait for.
		return s.approvalsEvents(context.Background(), *ar)
	}
	return AdminReply{Approvals: &rep}, nil
}

// approvalsEvents answers an events request, its wait ended early by ctx
// (the running host's shutdown, or the watch's connection closing).
func (s *Store) approvalsEvents(ctx context.Context, ar ApprovalsRequest) (AdminReply, error) {
	wait := time.Duration(ar.WaitMs) * time.Millisecond
	if ar.WaitMs < 0 || wait > maxEventsWait {
		return AdminReply{}, refusedf("approvals events: a wait of %dms, the bound is %v", ar.WaitMs, maxEventsWait)
	}
	evs, cursor, err := s.AskEvents(ctx, ar.After, wait)
	if err != nil {
		return AdminReply{}, err
	}
	return AdminReply{Approvals: &ApprovalsReply{Events: evs, Cursor: cursor}}, nil
}
