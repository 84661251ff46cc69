package views

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The checks of an answer to an ask on plain values (DESIGN.md section 5,
// "Answer"): the store (package operator) applies them under its lock to
// the ask as it stands.

// AskRefusal is an answer the host did not take: the ask is unchanged.
// It matches ErrRefused (a CLI exits 2); Reason is the one line the
// answerer is told, exactly.
type AskRefusal struct{ Reason string }

// Error is the refusal as Refusedf words one: "refused: REASON".
func (e *AskRefusal) Error() string { return ErrRefused.Error() + ": " + e.Reason }

// Is makes an AskRefusal match ErrRefused.
func (e *AskRefusal) Is(target error) bool { return target == ErrRefused }

// Refusal is e as the control channel answers it (code msg.CodeApprovals).
func (e *AskRefusal) Refusal() msg.Refusal {
	return msg.Refusal{Code: msg.CodeApprovals, Reason: e.Reason}
}

// CheckHumanAnswer checks a human's answer's own fields: a verdict that
// decides, a note within its bound on one line, who answered.
func CheckHumanAnswer(a *Answer) error {
	if err := CheckAnswer(a.Verdict, a.Note); err != nil {
		return err
	}
	if a.Advisor != "" {
		return Refusedf("an advisor answers through its controller's control channel (advise), not as a human")
	}
	if a.By == "" {
		return Refusedf("an answer names who gave it")
	}
	return nil
}

// CheckAdvise is why an advisor's answer's own fields are refused (code
// msg.CodeBadRequest), or "": its name, its verdict, its sentence, its
// account.
func CheckAdvise(ad *msg.Advise) string {
	if err := hostlog.ValidAgentName(ad.Advisor); err != nil {
		return strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")
	}
	if ad.Verdict != msg.VerdictApprove && ad.Verdict != msg.VerdictDeny && ad.Verdict != msg.VerdictWait {
		return fmt.Sprintf("verdict %q is none of approve, deny and wait", hostlog.QuoteLine(string(ad.Verdict), 20))
	}
	if why := hostlog.LineWithin("the sentence", ad.Sentence, 1, msg.MaxAdviceSentence); why != "" {
		return why
	}
	if ad.AdvisorUID != "" {
		if err := hostlog.ValidUID("the advisor's account", ad.AdvisorUID); err != nil {
			return err.Error()
		}
	}
	return ""
}

// AnsweredRefusal is why a human may not answer ask v: it was answered
// (naming who, with account, and when), expired or lapsed, or an answer's
// record is on its way (answering); "" when it is pending.
func AnsweredRefusal(v msg.AskView, account string, answering bool) string {
	switch {
	case answering:
		return fmt.Sprintf("ask %s is being answered", v.ID)
	case v.State == msg.AskExpired:
		return fmt.Sprintf("ask %s was already answered: it expired unanswered at %s to %s", v.ID, rfc3339(v.AnsweredAt), v.OnTimeout)
	case v.State == msg.AskLapsed:
		return fmt.Sprintf("ask %s was already answered: approved by %s at %s, then lapsed uncollected at %s to %s", v.ID, v.AnsweredBy, rfc3339(v.AnsweredAt), rfc3339(v.CollectBy), v.OnTimeout)
	case v.State != msg.AskPending:
		who := v.AnsweredBy
		if account != "" {
			who += " (" + account + ")"
		}
		return fmt.Sprintf("ask %s was already answered: %s by %s at %s", v.ID, v.State, who, rfc3339(v.AnsweredAt))
	}
	return ""
}

// AdvisorRefusal is why advisor may not answer ask v, or "": its own
// ask, no advisors allowed by the asking agent's policy p, not one of
// them, the ask already answered (or answering) and, when counted
// (approve and deny, not wait), the bound of agent answers spent (spent
// so far for the ask's conversation).
func AdvisorRefusal(v msg.AskView, advisor string, p *msg.ApprovalPolicy, answering, counted bool, spent uint64) string {
	switch {
	case advisor == v.Agent:
		return "an advisor never answers an ask raised by its own identity"
	case p == nil || len(p.Advisors) == 0:
		return fmt.Sprintf("agent answers are not allowed for agent %s's asks", v.Agent)
	case !p.MayAdvise(advisor):
		return fmt.Sprintf("agent %s is not an advisor of agent %s's asks", advisor, v.Agent)
	case v.State != msg.AskPending || answering:
		return fmt.Sprintf("ask %s was already answered", v.ID)
	}
	if bound := p.AgentAnswerBound(); counted && spent >= bound {
		conv := "no conversation"
		if v.Conversation != "" {
			conv = "conversation " + cmp.Or(v.ConversationName, v.Conversation)
		}
		return fmt.Sprintf("agent answers spent: %d of %d for %s; this ask waits for a human", spent, bound, conv)
	}
	return ""
}
