package views

import (
	"fmt"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The words of an ask's refusals (DESIGN.md section 5, "Approvals"): why
// a denied, expired or lapsed ask's call is refused, for its receipt and
// for the agent, and why an answer from the asking account is not taken.

// NothingReservedSentOrCharged ends the refusals of an asked attempt.
const NothingReservedSentOrCharged = "; nothing was reserved, sent or charged"

// rfc3339 is a unix ms instant as the reasons word it.
func rfc3339(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// DeniedReasons are the receipt reason and the agent's of ask v's call,
// refused because the ask went to deny: who denied it and their words
// (the note quoted within noteBound bytes), its expiry, or its approval's
// lapse at the end of its collect window.
func DeniedReasons(v msg.AskView, noteBound int) (receipt, agent string) {
	switch {
	case v.State == msg.AskLapsed:
		receipt = fmt.Sprintf("approved by %s at %s, not collected within its window: lapsed at %s to deny", v.AnsweredBy, rfc3339(v.AnsweredAt), rfc3339(v.CollectBy))
		agent = fmt.Sprintf("the call's approval (ask %s, by %s) lapsed uncollected at %s to its on-timeout verdict deny", v.ID, v.AnsweredBy, rfc3339(v.CollectBy))
		return receipt, agent + NothingReservedSentOrCharged
	case v.AnsweredBy == hostlog.AnsweredByExpiry:
		return fmt.Sprintf("expired unanswered at %s to deny", rfc3339(v.ExpiresAt)),
			fmt.Sprintf("the call's approval expired unanswered (ask %s) to its on-timeout verdict deny", v.ID) + NothingReservedSentOrCharged
	}
	receipt = "denied by " + v.AnsweredBy
	agent = fmt.Sprintf("the call's approval was denied (ask %s, by %s)", v.ID, v.AnsweredBy)
	if v.Note != "" {
		note := hostlog.QuoteLine(v.Note, noteBound)
		receipt += ": " + note
		agent += ": " + note
	}
	return receipt, agent + NothingReservedSentOrCharged
}

// OwnAccountRefusal is why a human answering as by ("uid:N") may not
// answer ask id, raised by the session of account asker ("" when the
// controller did not say), or "": no account answers its own ask, save
// the host's own account, host ("uid:N" of the store's owner). That is
// the operator, who may remove the mark itself (agent set), and on a
// machine of one account (steward-dev) the agent's account too: refusing
// it would leave such an ask to expire.
func OwnAccountRefusal(by, asker, host, id string) string {
	if asker != "" && by == asker && by != host {
		return fmt.Sprintf("%s raised ask %s: an approver never answers an ask of its own account", by, id)
	}
	return ""
}

// AdvisorAccountRefusal is why an advisor session of account uid may not
// answer an ask raised by the session of account asker, or "": the same
// account, whatever agent names either.
func AdvisorAccountRefusal(uid, asker string) string {
	if uid != "" && uid == asker {
		return "an advisor never answers an ask raised by its own identity"
	}
	return ""
}
