package operator

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// admission is an admitted attempt on its way through the dispatch path.
type admission struct {
	a      *attempt
	ctrl   *controller
	g      *grant
	grant  msg.Grant // a copy, read without the lock
	charge uint64
	day    int64
	// resolvedBy is the operator whose redelivery this admission delivers
	// (the redeliver record's By); its receipt names them. Empty for a
	// first delivery.
	resolvedBy string
	// agentOps are the operation patterns of the dispatch's agent when it
	// was admitted (nil: none), which a listing is filtered by as well.
	agentOps []string
	// approval is the policy of the agent's limits record (revision
	// limitsRevision) that marks the call for approval: it holds nothing
	// and becomes an ask. Nil for a call not marked.
	approval       *msg.ApprovalPolicy
	limitsRevision uint64
}

// admit checks the grant and the purse for one dispatch and, when both
// allow it, holds the charge and one daily count and registers the attempt
// id (so a second dispatch with it is a duplicate). The refusal for an
// operation the grant does not cover says nothing of whether it exists.
//
// A refusal names the limit that refused and, where it is known, when it
// refills; never the controller's name, a grant's id or validity window,
// a count, the balance or the price: it reaches the agent. The full detail
// goes to the host's log (logRefusal).
//
// A call the agent's limits record marks for approval (an invoke) is
// admitted the same way but holds nothing: its admission's approval is
// set, and the dispatch raises an ask for it (ask_dispatch.go).
func (s *Store) admit(ctrlName string, d *hostlog.CheckedDispatch) (*admission, *msg.Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, err := s.st.attemptOf(d.Attempt); err != nil {
		s.log.Error("steward-operator: the history index", "attempt", d.Attempt, "err", err)
		return nil, &msg.Refusal{Code: msg.CodeInternal, Reason: "the host could not read its history; nothing was reserved or sent"}
	} else if a != nil {
		return nil, &msg.Refusal{Code: msg.CodeDuplicate, Reason: fmt.Sprintf("attempt %s was already dispatched; it is never delivered twice", d.Attempt)}
	}
	return s.admitLocked(ctrlName, d, nil)
}

// admitLocked is admit with s.mu held, past the duplicate check. prior is
// the attempt awaiting approval that a collect admits again (its ask was
// approved), which the admission takes over; nil for a new dispatch.
func (s *Store) admitLocked(ctrlName string, d *hostlog.CheckedDispatch, prior *attempt) (*admission, *msg.Refusal) {
	st := s.st
	now := s.clockLocked()
	c, ok := st.Controllers[ctrlName]
	if !ok {
		s.logRefusal(d, "the route's controller is not pinned", "controller", ctrlName)
		return nil, noGrantRefusal(d)
	}
	chosen, ref := s.chooseGrant(c, d, now.UnixMilli())
	if ref != nil {
		return nil, ref
	}
	charge := chosen.Grant.DiscoveryPrice
	if d.Kind == msg.KindInvoke {
		charge = chosen.Grant.Price
	}
	// The day counted is never earlier than the grant's latest one: see use.
	day := max(utcDay(now), chosen.Day)
	if ref := s.limits(c, chosen, d, charge, day, 0, 0); ref != nil {
		return nil, ref
	}
	// The agent's limits last: the check takes a token of its rate.
	if ref := s.agentRefusal(c, d, charge, day, now.UnixMilli(), false); ref != nil {
		return nil, ref
	}
	al := st.limitsOf(ctrlName, d.Agent) // the one look-up of the agent's record (or the default): its patterns and its approval policy
	if al == nil {
		s.warnNoRecord(ctrlName, d.Agent)
	}
	adm := &admission{ctrl: c, g: chosen, grant: chosen.Grant, charge: charge, day: day, agentOps: al.operations()}
	if prior == nil && al != nil && d.Kind == msg.KindInvoke && al.Limits.Approval.Marks(d.Application, d.Operation) {
		adm.approval, adm.limitsRevision = al.Limits.Approval, al.Limits.Revision
		adm.a = &attempt{ID: d.Attempt, Controller: ctrlName, Application: d.Application, State: stateAdmitting,
			Agent: d.Agent, Conversation: d.Conversation}
		st.Attempts[d.Attempt] = adm.a
		return adm, nil
	}
	c.Purse.Holds += charge
	chosen.use(day)
	st.agentHold(d.Attempt, ctrlName, d.Agent, d.Conversation, day, charge)
	adm.a = prior
	if adm.a == nil {
		adm.a = &attempt{ID: d.Attempt, Controller: ctrlName, State: stateAdmitting, Agent: d.Agent, Conversation: d.Conversation}
		st.Attempts[d.Attempt] = adm.a
	}
	adm.a.Application, adm.a.Grant, adm.a.Charge, adm.a.Day = d.Application, chosen.Grant.ID, charge, day
	return adm, nil
}

// chooseGrant picks the first grant of controller c in force that covers
// d, or refuses: an expired or revoked grant that covers it is named as
// such (the agent learns which limit refused, not the grant).
func (s *Store) chooseGrant(c *controller, d *hostlog.CheckedDispatch, nowMs int64) (*grant, *msg.Refusal) {
	st := s.st
	var revoked, expired *grant
	for _, id := range st.GrantOrder {
		g := st.Grants[id]
		if g.Grant.Controller != c.Name || !g.Grant.Covers(d.Application, d.Operation) {
			continue
		}
		switch {
		case g.Revoked:
			revoked = g
		case !g.Grant.Live(nowMs):
			expired = g
		default:
			return g, nil
		}
	}
	switch {
	case expired != nil:
		s.logRefusal(d, "the grant is not in force", "grant", expired.Grant.ID,
			"notBefore", time.UnixMilli(expired.Grant.NotBefore).UTC().Format(time.RFC3339),
			"notAfter", time.UnixMilli(expired.Grant.NotAfter).UTC().Format(time.RFC3339),
			"clock", time.UnixMilli(nowMs).UTC().Format(time.RFC3339))
		return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: notInForceReason(d)}
	case revoked != nil:
		s.logRefusal(d, "the grant is revoked", "grant", revoked.Grant.ID)
		return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: revokedReason(d)}
	default:
		s.logRefusal(d, "no grant covers the call", "controller", c.Name)
		return nil, noGrantRefusal(d)
	}
}

// limits checks the purse and the daily count of grant g for a call of
// charge on day. held and counted are what the call already holds of them:
// nothing at admission; checked again, its own hold and daily count.
// Nil when they allow it.
func (s *Store) limits(c *controller, g *grant, d *hostlog.CheckedDispatch, charge uint64, day int64, held, counted uint64) *msg.Refusal {
	p := &c.Purse
	if p.Frozen {
		s.logRefusal(d, "the purse is frozen", "controller", c.Name)
		return &msg.Refusal{Code: msg.CodeFrozen, Reason: "the purse is frozen: calls resume when the operator thaws it"}
	}
	if avail := p.available() + held; avail < charge {
		s.logRefusal(d, "the purse has too few credits", "controller", c.Name, "available", avail, "charge", charge)
		return &msg.Refusal{Code: msg.CodeInsufficient, Reason: "the purse has too few credits for this call: calls resume when the operator funds it"}
	}
	if used := g.usedOn(day) - min(counted, g.usedOn(day)); used >= g.Grant.PerDay {
		s.logRefusal(d, "the grant's daily count is used up", "grant", g.Grant.ID, "perDay", g.Grant.PerDay, "day", day)
		return &msg.Refusal{Code: msg.CodeDailyLimit, Reason: dailyLimitReason(day)}
	}
	return nil
}

// unuse gives back the daily count an admission took, on its day, and
// its agent's counts.
func (st *state) unuse(adm *admission) {
	if adm.g.Day == adm.day && adm.g.Count > 0 {
		adm.g.Count--
	}
	st.agentUnhold(adm.a.ID, adm.ctrl.Name, adm.a.Agent, adm.a.Conversation, adm.day, adm.charge)
}

// stoppedBeforeSending ends a refusal of an admitted call checked again.
const stoppedBeforeSending = "; the call was admitted, then stopped before it was sent: nothing was sent or charged"

// recheck checks an admission again at the last moment, once the payer has
// consented and just before the reservation is journaled, with s.mu held:
// a freeze, a revoke or an expiry that landed during the consent wait, its
// route deactivated or removed, or the dispatch's deadline passing, stops
// the call. The admission still holds its charge and its daily count
// (unless the day turned since), which the purse and count checks allow for.
func (s *Store) recheck(adm *admission, d *hostlog.CheckedDispatch) *msg.Refusal {
	now := s.clockLocked()
	if ref := s.deadlineRefusal(d, "during the consent wait"); ref != nil {
		return ref
	}
	g := adm.g
	var ref *msg.Refusal
	switch why := s.st.notActiveReason(d.Route); {
	case why != "":
		s.logRefusal(d, "the route was deactivated or removed during the consent wait", "route", d.Route)
		ref = &msg.Refusal{Code: msg.CodeUnavailable, Reason: strings.TrimSuffix(why, nothingReservedOrSent)}
	case g.Revoked:
		s.logRefusal(d, "the grant was revoked during the consent wait", "grant", g.Grant.ID)
		ref = &msg.Refusal{Code: msg.CodeNoGrant, Reason: revokedReason(d)}
	case !g.Grant.Live(now.UnixMilli()):
		s.logRefusal(d, "the grant went out of force during the consent wait", "grant", g.Grant.ID,
			"notAfter", time.UnixMilli(g.Grant.NotAfter).UTC().Format(time.RFC3339), "clock", now.UTC().Format(time.RFC3339))
		ref = &msg.Refusal{Code: msg.CodeNoGrant, Reason: notInForceReason(d)}
	default:
		var counted uint64
		if g.Day == adm.day {
			counted = 1
		}
		ref = s.limits(adm.ctrl, g, d, adm.charge, adm.day, adm.charge, counted)
		if ref == nil {
			ref = s.agentRefusal(adm.ctrl, d, adm.charge, adm.day, now.UnixMilli(), true)
		}
	}
	if ref != nil {
		ref.Reason += stoppedBeforeSending
	}
	return ref
}

// commitReserve checks the admission again (recheck) and journals the
// reservation and mark-send of the attempt, in one step under s.mu so that
// no freeze or revoke applied before it is missed. When it returns a
// refusal the admission still holds its place, and the caller ends it with
// commitRefused; when it returns neither a refusal nor an error, delivery
// may begin.
func (s *Store) commitReserve(adm *admission, d *hostlog.CheckedDispatch, consent []byte) (*msg.Refusal, error) {
	s.mu.Lock()
	if ref := s.recheck(adm, d); ref != nil {
		s.mu.Unlock()
		return ref, nil
	}
	p := &adm.ctrl.Purse
	p.Holds -= adm.charge
	p.Charged += adm.charge
	s.st.Ledger++
	rec := hostlog.ReserveV2{
		Reserve: hostlog.Reserve{Attempt: d.Attempt, Controller: adm.ctrl.Name, Grant: adm.grant.ID, Application: d.Application,
			Operation: d.Operation, Kind: d.Kind, RequestSHA256: d.SHA[:], Charge: adm.charge,
			Consent: consent, Day: adm.day, Ledger: s.st.Ledger},
		Method: d.Req.Method, Path: d.Req.Path, Body: d.Req.Body, Agent: d.Agent, Conversation: d.Conversation,
	}
	adm.a.State = msg.StateDeliveryRequested
	s.mu.Unlock()
	at, err := s.append(hostlog.KindReserveV2, rec)
	if err == nil {
		s.mu.Lock()
		adm.a.ReserveAt = at
		if adm.a.First == 0 {
			adm.a.First = at.Seq
		}
		s.mu.Unlock()
	}
	if err != nil {
		s.mu.Lock()
		p.Charged -= adm.charge
		s.st.unuse(adm)
		delete(s.st.Attempts, adm.a.ID)
		s.mu.Unlock()
		return nil, err
	}
	return nil, nil
}

// commitUncertain marks an attempt uncertain: sending began and no answer
// was recorded. It keeps its reservation. The record only adds the detail;
// a reserve without an outcome is uncertain after a restart anyway.
func (s *Store) commitUncertain(adm *admission, detail string, log *slog.Logger) {
	// The state turns uncertain only once the record is appended (or
	// failed): an operator may resolve an uncertain attempt, and the
	// resolve record must follow this one in the journal.
	_, err := s.append(hostlog.KindUncertain, hostlog.Uncertain{Attempt: adm.a.ID, Detail: detail})
	if err != nil {
		log.Error("steward-operator: uncertain record", "attempt", adm.a.ID, "err", err)
	}
	s.mu.Lock()
	adm.a.State, adm.a.Detail = msg.StateUncertain, detail
	s.mu.Unlock()
}

// Inspect answers what the host recorded of one attempt of controller ctrl.
// An attempt of another controller is not-seen: a route's channel learns
// nothing of other controllers' attempts.
func (s *Store) Inspect(ctrl, id string) (msg.InspectResult, error) {
	s.mu.Lock()
	a, err := s.st.attemptOf(id)
	if err != nil {
		s.mu.Unlock()
		return msg.InspectResult{}, err
	}
	if a != nil && a.Controller == ctrl && a.State == stateAdmitting && a.Grant != "" {
		s.mu.Unlock() // holding its reservation, soon its consent: never not-seen (DESIGN.md 5, "One consent a requestId")
		return msg.InspectResult{Attempt: id, State: msg.StatePending, Detail: "being admitted: the host holds its reservation and waits for, or holds, the payer's consent"}, nil
	}
	if a == nil || a.Controller != ctrl || a.State == stateAdmitting {
		s.mu.Unlock()
		return msg.InspectResult{Attempt: id, State: msg.StateNotSeen}, nil
	}
	res := msg.InspectResult{Attempt: id, State: a.State, Detail: a.inspectDetail(), RedeliveredBy: a.RedeliveredBy}
	if k := s.st.askByAttempt[id]; k != nil && a.State == msg.StateAwaitingApproval {
		res.Ask = k.ticket(s.clockLocked().UnixMilli())
	}
	at := a.EndAt
	s.mu.Unlock()
	if at.Seq == 0 {
		return res, nil
	}
	out, err := s.endRecord(at, id)
	if err != nil {
		return msg.InspectResult{}, err
	}
	res.Status, res.Body, res.Receipt = out.Status, out.Body, out.Receipt
	return res, nil
}
