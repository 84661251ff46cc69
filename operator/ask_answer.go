package operator

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// AskRefusal is an answer the host did not take (views.AskRefusal).
type AskRefusal = views.AskRefusal

// AnswerAsk answers ask id for a human: the first answer wins (a
// compare-and-swap on the durable record: the ask must be pending and no
// answer's record on its way, checked and marked under s.mu before the
// append). An advisor answers through Advise alone, which holds it to its
// checks and bound. An ask whose expiry has passed is expired first, and
// the answer refused.
func (s *Store) AnswerAsk(id string, a views.Answer) (msg.AskView, error) {
	if err := views.CheckHumanAnswer(&a); err != nil {
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
	why := views.OwnAccountRefusal(a.By, k.AgentUID, ownAccount, k.ID)
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

// ownAccount is the host's own account as an answer's By names it: the
// store's owner, whose answers are the operator's (views.OwnAccountRefusal).
var ownAccount = fmt.Sprintf("uid:%d", os.Getuid())

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
	if why := views.CheckAdvise(&ad); why != "" {
		return refused(msg.CodeBadRequest, why)
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
	why := views.AdvisorAccountRefusal(ad.AdvisorUID, k.AgentUID)
	if why == "" {
		why = s.st.advisorRefusal(k, ad.Advisor, ad.Verdict != msg.VerdictWait)
	}
	if why == "" && ad.Verdict != msg.VerdictWait {
		why = s.st.advisorDayRefusal(k, utcDay(s.clockLocked())) // ask_bounds.go
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
// or "" (views.AdvisorRefusal, with the asking agent's current policy).
func (st *state) advisorRefusal(k *ask, advisor string, counted bool) string {
	var p *msg.ApprovalPolicy
	if al := st.limitsOf(k.Controller, k.Agent); al != nil {
		p = al.Limits.Approval
	}
	spent := st.AdvisorAnswers[convKey{k.Controller, k.Agent, k.Conversation}]
	return views.AdvisorRefusal(k.view(), advisor, p, k.answering, counted, spent)
}

// answeredRefusal is why a human may not answer ask k (with s.mu held),
// or "" when it is pending (views.AnsweredRefusal).
func (k *ask) answeredRefusal() string {
	return views.AnsweredRefusal(k.view(), k.Account, k.answering)
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
		CollectBy: hostlog.CollectBy(k.RaisedAt, k.ExpiresAt, at, a.Verdict, k.OnTimeout)}
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
