package operator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// AskRefusal is an answer the host did not take: the ask is unchanged.
// It matches ErrRefused (a CLI exits 2); Reason is the one line the
// answerer is told, exactly.
type AskRefusal struct{ Reason string }

// Error is the refusal as refusedf words one: "refused: REASON".
func (e *AskRefusal) Error() string { return views.ErrRefused.Error() + ": " + e.Reason }

// Is makes an AskRefusal match ErrRefused.
func (e *AskRefusal) Is(target error) bool { return target == views.ErrRefused }

// Refusal is e as the control channel answers it (code msg.CodeApprovals).
func (e *AskRefusal) Refusal() msg.Refusal {
	return msg.Refusal{Code: msg.CodeApprovals, Reason: e.Reason}
}

// AnswerAsk answers ask id for a human: the first answer wins (a
// compare-and-swap on the durable record: the ask must be pending and no
// answer's record on its way, checked and marked under s.mu before the
// append). An advisor answers through Advise alone, which holds it to its
// checks and bound. An ask whose expiry has passed is expired first, and
// the answer refused.
func (s *Store) AnswerAsk(id string, a views.Answer) (msg.AskView, error) {
	if err := checkAnswer(&a); err != nil {
		return msg.AskView{}, err
	}
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if err := s.expireDueLocked(id); err != nil {
		return msg.AskView{}, err
	}
	s.mu.Lock()
	k, err := s.st.askOf(id)
	if k == nil {
		s.mu.Unlock()
		return msg.AskView{}, lookupOr(err, &AskRefusal{Reason: "no ask " + hostlog.QuoteLine(id, 40)})
	}
	why := k.ownAccountRefusal(a.By)
	if why == "" {
		why = k.answeredRefusal()
	}
	if why != "" {
		v := k.view()
		s.mu.Unlock()
		s.logAsk("answer refused", v, "by", a.By, "verdict", a.Verdict, "reason", why)
		return v, &AskRefusal{Reason: why}
	}
	at := k.claimAnswer(s.clockLocked())
	s.mu.Unlock()
	return s.recordAnswer(k, a, at)
}

// Advise takes advisor's verdict on an ask of controller's (the advisor is
// named by the controller from SO_PEERCRED): the asking agent's current
// limits record must name it an advisor, it never answers its own asks,
// and the approve and deny answers of advisors per asking agent and
// conversation are bounded (msg.ApprovalPolicy.AgentAnswerBound). A wait
// is checked the same way, save the bound, and changes nothing: it is
// never journaled and never counts. A refusal is the result's Refused,
// the bound holding and not an error: the ask keeps waiting.
func (s *Store) Advise(controller string, ad msg.Advise) msg.AdviseResult {
	refused := func(code, reason string) msg.AdviseResult {
		return msg.AdviseResult{Refused: &msg.Refusal{Code: code, Reason: reason}}
	}
	if err := hostlog.ValidAgentName(ad.Advisor); err != nil {
		return refused(msg.CodeBadRequest, strings.TrimPrefix(err.Error(), views.ErrRefused.Error()+": "))
	}
	if ad.Verdict != msg.VerdictApprove && ad.Verdict != msg.VerdictDeny && ad.Verdict != msg.VerdictWait {
		return refused(msg.CodeBadRequest, fmt.Sprintf("verdict %q is none of approve, deny and wait", hostlog.QuoteLine(string(ad.Verdict), 20)))
	}
	if why := hostlog.LineWithin("the sentence", ad.Sentence, 1, msg.MaxAdviceSentence); why != "" {
		return refused(msg.CodeBadRequest, why)
	}
	if ad.AdvisorUID != "" {
		if err := hostlog.ValidUID("the advisor's account", ad.AdvisorUID); err != nil {
			return refused(msg.CodeBadRequest, err.Error())
		}
	}
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if err := s.expireDueLocked(ad.Ask); err != nil {
		s.log.Error("steward-operator: ask expiry record", "ask", ad.Ask, "err", err)
		return refused(msg.CodeJournal, "the host could not journal the ask's expiry; the ask is unchanged")
	}
	s.mu.Lock()
	k, err := s.st.askOf(ad.Ask)
	if err != nil {
		s.mu.Unlock()
		s.log.Error("steward-operator: the history index", "ask", ad.Ask, "err", err)
		return refused(msg.CodeInternal, "the host could not read its history; the ask is unchanged")
	}
	if k == nil || k.Controller != controller {
		s.mu.Unlock()
		return refused(msg.CodeApprovals, "no ask "+hostlog.QuoteLine(ad.Ask, 40))
	}
	why := k.advisorAccountRefusal(ad.AdvisorUID)
	if why == "" {
		why = s.st.advisorRefusal(k, ad.Advisor, ad.Verdict != msg.VerdictWait)
	}
	if why != "" {
		v := k.view()
		s.mu.Unlock()
		s.logAsk("answer refused", v, "by", "agent:"+ad.Advisor, "verdict", ad.Verdict, "reason", why)
		return msg.AdviseResult{Ask: v, Refused: &msg.Refusal{Code: msg.CodeApprovals, Reason: why}}
	}
	if ad.Verdict == msg.VerdictWait {
		v := k.view()
		s.mu.Unlock()
		return msg.AdviseResult{Ask: v}
	}
	at := k.claimAnswer(s.clockLocked())
	s.mu.Unlock()
	v, err := s.recordAnswer(k, views.Answer{Verdict: ad.Verdict, By: "agent:" + ad.Advisor, Advisor: ad.Advisor, Note: ad.Sentence}, at)
	if err != nil {
		s.log.Error("steward-operator: ask answer record", "ask", ad.Ask, "err", err)
		return msg.AdviseResult{Ask: v, Refused: &msg.Refusal{Code: msg.CodeJournal, Reason: "the host could not journal the answer; the ask is unchanged"}}
	}
	return msg.AdviseResult{Ask: v}
}

// advisorRefusal is why advisor may not answer ask k (with s.mu held),
// or "": its own ask, no advisors allowed for the asking agent, not one
// of them, the ask already answered and, when counted (approve and
// deny, not wait), the bound of agent answers spent.
func (st *state) advisorRefusal(k *ask, advisor string, counted bool) string {
	if advisor == k.Agent {
		return "an advisor never answers an ask raised by its own identity"
	}
	var p *msg.ApprovalPolicy
	if al := st.Agents[agentKey{k.Controller, k.Agent}]; al != nil {
		p = al.Limits.Approval
	}
	switch {
	case p == nil || len(p.Advisors) == 0:
		return fmt.Sprintf("agent answers are not allowed for agent %s's asks", k.Agent)
	case !p.MayAdvise(advisor):
		return fmt.Sprintf("agent %s is not an advisor of agent %s's asks", advisor, k.Agent)
	case k.State != msg.AskPending || k.answering:
		return fmt.Sprintf("ask %s was already answered", k.ID)
	}
	if !counted {
		return ""
	}
	bound := p.AgentAnswerBound()
	if n := st.AdvisorAnswers[convKey{k.Controller, k.Agent, k.Conversation}]; n >= bound {
		conv := "no conversation"
		if k.Conversation != "" {
			conv = "conversation " + k.Conversation
		}
		return fmt.Sprintf("agent answers spent: %d of %d for %s; this ask waits for a human", n, bound, conv)
	}
	return ""
}

// answeredRefusal is why a human may not answer ask k (with s.mu held):
// it was answered (naming who and when) or expired, or an answer's record
// is on its way; "" when it is pending.
func (k *ask) answeredRefusal() string {
	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
	switch {
	case k.answering:
		return fmt.Sprintf("ask %s is being answered", k.ID)
	case k.State == msg.AskExpired:
		return fmt.Sprintf("ask %s was already answered: it expired unanswered at %s to %s", k.ID, at(k.AnsweredAt), k.Verdict)
	case k.State == msg.AskLapsed:
		return fmt.Sprintf("ask %s was already answered: approved by %s at %s, then lapsed uncollected at %s to %s", k.ID, k.AnsweredBy, at(k.AnsweredAt), at(k.CollectBy), k.Verdict)
	case k.State != msg.AskPending:
		who := k.AnsweredBy
		if k.Account != "" {
			who += " (" + k.Account + ")"
		}
		return fmt.Sprintf("ask %s was already answered: %s by %s at %s", k.ID, k.State, who, at(k.AnsweredAt))
	}
	return ""
}

// claimAnswer marks pending ask k as being answered at now, with
// Store.mu held after the checks: the compare-and-swap on the durable
// record, which a second answer then finds taken (answeredRefusal). It
// returns the answer's time (unix ms).
func (k *ask) claimAnswer(now time.Time) int64 {
	k.answering = true
	return now.UnixMilli()
}

// recordAnswer journals answer a to ask k, which claimAnswer marked, at
// at, and applies it; a failed append gives the claim up. Called with
// s.askMu held.
func (s *Store) recordAnswer(k *ask, a views.Answer, at int64) (msg.AskView, error) {
	rec := hostlog.AskAnswer{Ask: k.ID, Verdict: a.Verdict, By: a.By, Account: a.Account, Advisor: a.Advisor, Note: a.Note, At: at,
		CollectBy: k.collectByAt(at, a.Verdict)}
	seq, err := s.append(hostlog.KindAskAnswer, rec)
	s.mu.Lock()
	if err != nil {
		k.answering = false
		v := k.view()
		s.mu.Unlock()
		return v, fmt.Errorf("ask %s: the host could not journal the answer: %w", k.ID, err)
	}
	state := msg.AskApproved
	if a.Verdict == msg.VerdictDeny {
		state = msg.AskDenied
	}
	k.CollectBy = rec.CollectBy
	s.st.decideAsk(k, seq.Seq, state, a.Verdict, a.By, a.Account, a.Advisor, a.Note, at)
	s.st.attemptAnswered(k)
	v, dec := k.view(), k.decision()
	s.mu.Unlock()
	s.logAsk("answered", v, "by", a.By, "verdict", a.Verdict)
	s.daemon.AskDecided(dec)
	return v, nil
}

func (k *ask) decision() AskDecision {
	return AskDecision{Attempt: k.Attempt, Ask: k.ID, Route: k.Route, Controller: k.Controller, State: k.State}
}

// checkAnswer checks a human's answer's own fields: a verdict that
// decides, a note within its bound on one line, who answered.
func checkAnswer(a *views.Answer) error {
	if err := views.CheckAnswer(a.Verdict, a.Note); err != nil {
		return err
	}
	if a.Advisor != "" {
		return views.Refusedf("an advisor answers through its controller's control channel (advise), not as a human")
	}
	if a.By == "" {
		return views.Refusedf("an answer names who gave it")
	}
	return nil
}

// expireDue applies lazy expiry: every pending ask past its expiry (only
// ask id when id is not empty) gets its ask-expired record. Any path that
// reads an ask calls it first.
func (s *Store) expireDue(id string) error {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	return s.expireDueLocked(id)
}

// expireDueLocked is expireDue with s.askMu held. A read-only store
// journals nothing: it shows the asks as they are recorded.
func (s *Store) expireDueLocked(id string) error {
	if s.readOnly {
		return nil
	}
	s.mu.Lock()
	now := s.clockLocked().UnixMilli()
	var due []*ask
	if id != "" {
		if k := s.st.Asks[id]; k != nil && k.due(now) {
			due = append(due, k)
		}
	} else {
		for _, k := range s.st.asksPending {
			if k.due(now) {
				due = append(due, k)
			}
		}
		slices.SortFunc(due, func(a, b *ask) int { return strings.Compare(a.ID, b.ID) })
	}
	s.mu.Unlock()
	for _, k := range due {
		if err := s.expire(k); err != nil {
			return err
		}
	}
	return s.windowsDueLocked(id)
}

// expire journals ask k's expiry to its on-timeout verdict (at its
// expiry time) and applies it. Called with s.askMu held.
func (s *Store) expire(k *ask) error {
	s.mu.Lock()
	k.answering = true
	rec := hostlog.AskExpired{Ask: k.ID, Verdict: k.OnTimeout, At: k.ExpiresAt}
	s.mu.Unlock()
	seq, err := s.append(hostlog.KindAskExpired, rec)
	s.mu.Lock()
	if err != nil {
		k.answering = false
		s.mu.Unlock()
		return fmt.Errorf("ask %s: the host could not journal its expiry: %w", k.ID, err)
	}
	s.st.decideAsk(k, seq.Seq, msg.AskExpired, k.OnTimeout, hostlog.AnsweredByExpiry, "", "", "", k.ExpiresAt)
	s.st.attemptAnswered(k)
	v, dec := k.view(), k.decision()
	s.mu.Unlock()
	s.logAsk("expired", v, "verdict", k.OnTimeout)
	s.daemon.AskDecided(dec)
	return nil
}
