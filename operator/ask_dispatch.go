package operator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// The dispatch path of approvals (DESIGN.md section 5, "Approvals"). A
// dispatch that admit marks (admission.approval) raises an ask and is
// answered at once, awaiting approval: the host does not park, the
// controller does, and collects the verdict on the same attempt. A collect
// of a pending ask answers a fresh ticket; of a denied one, a refused
// record with its receipt (charge 0); of an approved one, admission again
// as it stands now and then the rest of a dispatch (deliverAdmitted) under
// the collect's deadline.

// nothingReservedSentOrCharged ends the refusals of an asked attempt.
const nothingReservedSentOrCharged = views.NothingReservedSentOrCharged

// raiseAsk journals the ask of admitted call c, which holds nothing, and
// answers its ticket. A journal failure forgets the attempt: nothing was
// reserved or sent.
func (s *Store) raiseAsk(c *hostlog.CheckedDispatch, adm *admission) msg.DispatchResult {
	now := s.clock().UnixMilli()
	p := adm.approval
	// checkDispatch parsed this body already: it is an invoke's, canonical.
	ib, _ := oracleops.ParseInvokeBody(c.Req.Body)
	k := &ask{
		Attempt: c.Attempt, Controller: adm.ctrl.Name, Route: c.Route, Agent: c.Agent, Conversation: c.Conversation,
		Application: c.Application, Operation: c.Operation, Kind: c.Kind, RequestSHA: bytes.Clone(c.SHA[:]),
		Method: c.Req.Method, Path: c.Req.Path, Body: c.Req.Body, Arguments: ib.Arguments, Price: adm.charge,
		Justification: c.Justification, RaisedAt: now, ExpiresAt: now + p.Expiry().Milliseconds(), Park: p.Park(),
		OnTimeout: p.TimeoutVerdict(), LimitsRevision: adm.limitsRevision, CallDay: adm.day, AgentUID: c.AgentUID,
		ConversationName: c.ConversationName,
	}
	if err := s.raise(k); err != nil {
		if rr, ok := err.(*raiseRefused); ok {
			s.forgetAttempt(c.Attempt)
			return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateRefused, Refusal: rr.ref}
		}
		if !errors.Is(err, journal.ErrFailed) {
			s.forgetAttempt(c.Attempt)
		}
		return askFailed(c.Attempt, err, s.log)
	}
	failpoint.Hit(FailAfterAsk)
	return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateAwaitingApproval, Ask: k.ticket(now)}
}

// askFailed answers a dispatch whose ask record could not be appended.
// Nothing was reserved or sent either way. A record the journal removed
// is not there: a refusal, and the attempt is forgotten. After a failed
// fdatasync (journal.ErrFailed) the ask may be on disk when the host
// restarts and reads what is really there (the host exits now, section
// 4): not a refusal, which the controller would replay for the requestId
// while the ask waited, but uncertain, which it asks the host about when
// the agent calls again.
func askFailed(attempt string, err error, log *slog.Logger) msg.DispatchResult {
	if errors.Is(err, journal.ErrFailed) {
		log.Error("steward-operator: ask record: the journal failed; whether the ask is recorded is known once the host restarts; nothing reserved or sent", "attempt", attempt, "err", err)
		return msg.DispatchResult{Attempt: attempt, Outcome: msg.StateUncertain,
			Detail: "the host journal failed while recording the call's ask: nothing was reserved or sent, and whether the ask is recorded is known only once the host has restarted"}
	}
	log.Error("steward-operator: ask record; nothing reserved or sent", "attempt", attempt, "err", err)
	return refused(&msg.Dispatch{Attempt: attempt}, msg.CodeJournal, "the host could not journal the ask; nothing was reserved or sent")
}

// Collect answers a collect that came in on forward socket at: what
// became of the ask of one of its controller's attempts awaiting
// approval, and its end when it was decided.
func (s *Store) Collect(ctx context.Context, at ForwardSocket, col *msg.Collect) msg.DispatchResult {
	if err := hostlog.ValidAttemptID(col.Attempt); err != nil {
		return refused(&msg.Dispatch{Attempt: col.Attempt}, msg.CodeBadRequest, "collect: %v", err)
	}
	if res, ok := s.DeniedEnd(at.Controller, col.Attempt); ok {
		return res
	}
	k, tk, ref := s.claimCollect(at.Controller, col.Attempt)
	switch {
	case ref != nil:
		return msg.DispatchResult{Attempt: col.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	case tk != nil:
		return msg.DispatchResult{Attempt: col.Attempt, Outcome: msg.StateAwaitingApproval, Ask: tk}
	case k.Verdict == msg.VerdictDeny:
		receiptWhy, agentWhy := deniedReasons(k)
		return s.endAsked(k, &msg.Refusal{Code: msg.CodeDenied, Reason: agentWhy}, receiptWhy)
	}
	return s.goOnApproved(ctx, at, k, col.Deadline)
}

// deniedReasons are a denied ask's receipt reason and the agent's.
func deniedReasons(k *ask) (receipt, agent string) {
	return views.DeniedReasons(k.view(), maxPayerReason)
}

// goOnApproved goes on with an approved ask's attempt: admission again as
// it stands now (grant, purse, daily count, agent limits, the route), and
// then consent, reservation and delivery under the collect's deadline. A
// refusal at admission ends the attempt with a receipted refusal (it was
// admitted once, and its id is taken); a collect that cannot go on now (a
// deadline already past, another route's channel) ends nothing.
func (s *Store) goOnApproved(ctx context.Context, at ForwardSocket, k *ask, deadline int64) msg.DispatchResult {
	d := &msg.Dispatch{Attempt: k.Attempt}
	if at.Route != k.Route {
		s.unclaim(k.Attempt)
		return refused(d, msg.CodeBadRequest, "attempt %s was dispatched on route %s: collect it there", k.Attempt, k.Route)
	}
	rt, why := s.routeToServe(at)
	if why != "" {
		return s.endAsked(k, &msg.Refusal{Code: msg.CodeUnavailable, Reason: why}, "refused after approval, when admitted again: "+strings.TrimSuffix(why, nothingReservedOrSent))
	}
	c, err := hostlog.CheckDispatch(&rt, &msg.Dispatch{Attempt: k.Attempt, Method: k.Method, Path: k.Path, Body: k.Body,
		Agent: k.Agent, Deadline: deadline, Justification: k.Justification})
	if err == nil && !bytes.Equal(c.SHA[:], k.RequestSHA) {
		err = errors.New("the request is no longer the one asked")
	}
	if err != nil {
		s.log.Warn("steward-operator: an approved call no longer fits its route", "attempt", k.Attempt, "ask", k.ID, "err", err)
		return s.endAsked(k, &msg.Refusal{Code: msg.CodeUnavailable, Reason: "the route no longer takes the call as it was asked" + nothingReservedSentOrCharged},
			"refused after approval: the route no longer takes the request as it was asked")
	}
	if ref := s.checkDeadline(rt.Controller, c); ref != nil {
		s.unclaim(k.Attempt)
		return msg.DispatchResult{Attempt: k.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	}
	adm, ref := s.admitAgain(rt.Controller, c)
	if ref != nil {
		receiptWhy := "refused after approval, when admitted again: " + ref.Reason
		ref.Reason += "; the call was approved, then refused when admitted again" + nothingReservedSentOrCharged
		return s.endAsked(k, ref, receiptWhy)
	}
	return s.deliverAdmitted(ctx, &rt, c, adm)
}

// endAsked ends an asked attempt that holds nothing with a refused record
// and its receipt (charge 0, naming the ask and who answered it), and
// answers ref with the receipt.
func (s *Store) endAsked(k *ask, ref *msg.Refusal, receiptWhy string) msg.DispatchResult {
	receipt, err := s.commitAskRefused(k, receiptWhy)
	if err != nil {
		s.log.Error("steward-operator: refused record of an asked attempt; nothing sent or charged", "attempt", k.Attempt, "ask", k.ID, "err", err)
		ref.Reason += refusalUnrecorded(err)
		return msg.DispatchResult{Attempt: k.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	}
	failpoint.Hit(FailAfterRefused)
	return msg.DispatchResult{Attempt: k.Attempt, Outcome: msg.StateRefused, Refusal: ref, Receipt: receipt}
}

// claimCollect finds the ask of attempt id of controller ctrl, its expiry
// applied first. Pending: the fresh ticket. Decided: a copy of the ask,
// and the attempt is claimed (collecting), so a second collect is refused
// until this one ends it. Otherwise the refusal naming the attempt's state.
func (s *Store) claimCollect(ctrl, id string) (*ask, *msg.AskTicket, *msg.Refusal) {
	s.mu.Lock()
	a, err := s.st.attemptOf(id) // an ended one is refused by its state
	if err != nil {
		s.mu.Unlock()
		s.log.Error("steward-operator: the history index", "attempt", id, "err", err)
		return nil, nil, &msg.Refusal{Code: msg.CodeInternal, Reason: "the host could not read its history; nothing was done: collect again"}
	}
	ref := collectRefusal(a, ctrl, id)
	var askID string
	if ref == nil {
		askID = a.Ask
	}
	s.mu.Unlock()
	if ref != nil {
		return nil, nil, ref
	}
	if err := s.expireDue(askID); err != nil {
		s.log.Error("steward-operator: ask expiry record", "attempt", id, "err", err)
		return nil, nil, &msg.Refusal{Code: msg.CodeJournal, Reason: "the host could not journal the ask's expiry; the ask is unchanged: collect again"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a = s.st.Attempts[id]
	if ref := collectRefusal(a, ctrl, id); ref != nil {
		return nil, nil, ref
	}
	k := s.st.Asks[a.Ask]
	if k.State == msg.AskPending {
		return nil, k.ticket(s.clockLocked().UnixMilli()), nil
	}
	if k.answering {
		// Its collect window's record is on its way (ask_window.go).
		return nil, nil, &msg.Refusal{Code: msg.CodeUnavailable, Reason: fmt.Sprintf("the collect window of ask %s is being recorded; nothing was done: collect again", k.ID)}
	}
	a.collecting = true
	cp := *k
	return &cp, nil, nil
}

// collectRefusal is why attempt a (id) of controller ctrl cannot be
// collected, or nil: it must be ctrl's, awaiting approval and not being
// collected already. With s.mu held.
func collectRefusal(a *attempt, ctrl, id string) *msg.Refusal {
	switch {
	case a == nil || a.Controller != ctrl || a.State == stateAdmitting:
		return &msg.Refusal{Code: msg.CodeUnknown, Reason: fmt.Sprintf("attempt %s awaits no approval: the host has not seen it", id)}
	case a.State == msg.StateDeliveryRequested || a.State == msg.StateAwaitingApproval && a.collecting:
		return &msg.Refusal{Code: msg.CodeDuplicate, Reason: fmt.Sprintf("attempt %s is already being delivered", id)}
	case a.State != msg.StateAwaitingApproval:
		return &msg.Refusal{Code: msg.CodeDuplicate, Reason: fmt.Sprintf("attempt %s is %s, not awaiting approval: it is never delivered twice", id, a.State)}
	}
	return nil
}

// unclaim gives up a collect's claim on attempt id, leaving it awaiting
// approval.
func (s *Store) unclaim(id string) {
	s.mu.Lock()
	if a := s.st.Attempts[id]; a != nil {
		a.collecting = false
	}
	s.mu.Unlock()
}

// forgetAttempt drops an admitted attempt nothing durable names (its ask
// record failed).
func (s *Store) forgetAttempt(id string) {
	s.mu.Lock()
	delete(s.st.Attempts, id)
	s.mu.Unlock()
}

// admitAgain admits the claimed attempt of an approved ask again, as a
// dispatch is admitted now; the admission holds its charge and counts.
func (s *Store) admitAgain(ctrl string, c *hostlog.CheckedDispatch) (*admission, *msg.Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admitLocked(ctrl, c, s.st.Attempts[c.Attempt])
}

// commitAskRefused ends ask k's attempt, which holds nothing, with a
// refused record and its receipt (charge 0, Reason, the ask and who
// answered it). On an error the attempt stays awaiting approval, unclaimed.
func (s *Store) commitAskRefused(k *ask, reason string) ([]byte, error) {
	var a *attempt
	return s.commitEnd(receiptEnd{
		kind: hostlog.KindRefused,
		receipt: func() msg.Receipt {
			a = s.st.Attempts[k.Attempt]
			c := s.st.Controllers[k.Controller]
			return msg.Receipt{
				Attempt: k.Attempt, Controller: k.Controller, Application: k.Application, Operation: k.Operation, Kind: k.Kind,
				RequestSHA256: k.RequestSHA, BalanceAfter: c.Purse.balance(), Outcome: msg.StateRefused, Reason: reason,
				PriceApplied: msg.PriceNone, Agent: k.Agent, Conversation: k.Conversation, Ask: k.ID, AnsweredBy: k.AnsweredBy,
			}
		},
		record: func(signed []byte, seq uint64) any {
			return hostlog.Refused{Attempt: k.Attempt, Controller: k.Controller, Reason: reason, Receipt: signed, Seq: seq, Ledger: s.st.Ledger,
				Agent: k.Agent, Conversation: k.Conversation}
		},
		undo: func() { a.collecting = false },
		apply: func(at journal.Place) {
			a.State, a.Detail, a.EndAt, a.Charge, a.collecting = msg.StateRefused, reason, at, 0, false
		},
	})
}
