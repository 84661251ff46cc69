package views

import (
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// Answer is a decision on an ask: approve or deny, by whom. A human's By
// is "uid:N" (from SO_PEERCRED) and Account its account name; an
// advisor's Advisor is its agent name and By "agent:NAME". Note is the
// human's --note or the advisor's sentence.
type Answer struct {
	Verdict msg.Verdict
	By      string
	Account string
	Advisor string
	Note    string
}

// CheckAnswer refuses a human's verdict other than approve or deny, and a
// note past msg.MaxApprovalNote or of more than one line: what AnswerAsk
// refuses before anything is journaled, for a client to refuse before
// anything is sent.
func CheckAnswer(v msg.Verdict, note string) error {
	if v != msg.VerdictApprove && v != msg.VerdictDeny {
		return Refusedf("verdict %q: an answer approves or denies", hostlog.QuoteLine(string(v), 20))
	}
	if why := hostlog.LineWithin("the note", note, 0, msg.MaxApprovalNote); why != "" {
		return Refusedf("%s", why)
	}
	return nil
}

// The ask events `approvals watch` prints, one JSON line each.
const (
	AskRaised       = "raised"
	AskAnswered     = "answered"
	AskExpiredEvent = "expired"
	AskLapsedEvent  = "lapsed"
)

// AskEvent is one event of an ask, as its record made it: Seq is the
// record's journal sequence number (the watch's cursor), At when it
// happened (unix ms), Ask the ask as of that event.
type AskEvent struct {
	Seq   uint64      `cbor:"seq" json:"-"`
	Event string      `cbor:"event" json:"event"`
	At    int64       `cbor:"at" json:"at"`
	Ask   msg.AskView `cbor:"ask" json:"ask"`
}
