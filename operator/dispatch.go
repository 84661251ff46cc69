package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// Failpoints of the dispatch path (see doc.go for the state each leaves).
const (
	FailAfterReserve  = "host-after-reserve"
	FailAfterMarkSend = "host-after-mark-send"
	FailAfterSend     = "host-after-send"
	FailAfterOutcome  = "host-after-outcome"
	FailAfterNotSent  = "host-after-not-sent"
	FailAfterRefused  = "host-after-refused"
	FailAfterAsk      = "host-after-ask"
)

// ReserveTimeout bounds the payer-consent round trip on the reverse
// channel, and the running host's verdict push on it.
const ReserveTimeout = 10 * time.Second

func refused(d *msg.Dispatch, code, format string, args ...any) msg.DispatchResult {
	return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateRefused,
		Refusal: &msg.Refusal{Code: code, Reason: fmt.Sprintf(format, args...)}}
}

// ForwardSocket names the forward listener a frame came in on: the route
// it was opened for, and the socket and controller of the revision it was
// opened for. A listener may be closed while its channels stay open (the
// controller holds them between calls), so every dispatch and collect is
// checked against the route as it is when it arrives.
type ForwardSocket struct {
	Route, Forward, Controller string
}

// Serves reports whether the listener is the one route revision rec
// needs: its socket and its controller.
func (at ForwardSocket) Serves(rec msg.RouteRecord) bool {
	return at.Forward == rec.Forward && at.Controller == rec.Controller
}

// Dispatch runs DESIGN.md section 5 steps 4 to 6 for one dispatch that
// came in on forward socket at. It is served by its route's selected
// revision as it is when the dispatch arrives, and refused (unavailable,
// nothing journaled) once the route is not active or its revision is
// served on another socket or for another controller.
func (s *Store) Dispatch(ctx context.Context, at ForwardSocket, d *msg.Dispatch) msg.DispatchResult {
	rt, why := s.routeToServe(at)
	if why != "" {
		return refused(d, msg.CodeUnavailable, "%s", why)
	}
	return s.dispatch(ctx, &rt, d)
}

// routeToServe is the revision a dispatch on forward socket at is served
// by, or why it is refused: the route is not active, or its selected
// revision is served on another socket or for another controller (the
// controller redials it from the route's record).
func (s *Store) routeToServe(at ForwardSocket) (msg.RouteRecord, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if why := s.st.notActiveReason(at.Route); why != "" {
		return msg.RouteRecord{}, why
	}
	sel := s.st.Routes[at.Route].Selected()
	if !at.Serves(sel.Record) {
		return msg.RouteRecord{}, fmt.Sprintf("route %s is now served by its revision %d on another socket; nothing was reserved or sent", at.Route, sel.Record.Revision)
	}
	return sel.Record, ""
}

// dispatch runs DESIGN.md section 5 steps 4 to 6 for one request on route rt.
func (s *Store) dispatch(ctx context.Context, rt *msg.RouteRecord, d *msg.Dispatch) msg.DispatchResult {
	c, err := hostlog.CheckDispatch(rt, d)
	if err != nil {
		return refused(d, msg.CodeBadRequest, "%v", err)
	}
	if ref := s.refuseNoAgent(rt.Controller, c); ref != nil {
		return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	}
	if ref := s.checkDeadline(rt.Controller, c); ref != nil {
		return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	}
	adm, ref := s.admit(rt.Controller, c)
	if ref != nil {
		return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	}
	if adm.approval != nil {
		return s.raiseAsk(c, adm)
	}
	return s.deliverAdmitted(ctx, rt, c, adm)
}

// deliverAdmitted is the dispatch of an admitted attempt, from the payer's
// consent on: a first dispatch, or a collect whose ask was approved and
// which was admitted again (ask_dispatch.go). From here on the attempt
// holds its place: every exit journals either a reserve record or a
// refused one, with its receipt.
func (s *Store) deliverAdmitted(ctx context.Context, rt *msg.RouteRecord, c *hostlog.CheckedDispatch, adm *admission) msg.DispatchResult {
	var err error
	var consent []byte
	if adm.charge > 0 {
		consent, err = s.consent(ctx, rt, c, adm)
		if errors.Is(err, errConsentDeadline) {
			s.logRefusal(c, "the deadline passed during the consent wait", "deadline", time.UnixMilli(c.Deadline).UTC().Format(time.RFC3339Nano))
			ref := &msg.Refusal{Code: msg.CodeDeadlinePassed, Reason: deadlinePassedReason}
			return s.refuseAdmitted(adm, c, nil, ref, "refused before consent: the call's deadline passed during the consent wait")
		}
		var pm *principalMismatch
		if errors.As(err, &pm) {
			s.logRefusal(c, "the payer's consent names another principal than the dispatch's agent", "agent", c.Agent, "principal", pm.principal)
			return s.refuseAdmitted(adm, c, pm.consent, pm.refusal(), pm.receiptReason())
		}
		if err != nil {
			// The refusal may go out on a channel that is already dead: log
			// it, so that an attempt refused here is never dropped silently.
			s.log.Warn("steward-operator: no payer consent; nothing sent or charged", "attempt", c.Attempt, "err", err)
			ref := &msg.Refusal{Code: msg.CodeNoConsent, Reason: noConsentReason(err) + "; nothing was sent or charged"}
			return s.refuseAdmitted(adm, c, nil, ref, noConsentReceiptReason(err))
		}
	}
	// Admission again at the last moment, then journal first: the
	// reservation and mark-send, one record.
	ref, err := s.commitReserve(adm, c, consent)
	if ref != nil {
		why := "refused after the payer's consent, before anything was sent: "
		if consent == nil {
			why = "refused before sending (a free request needs no consent): "
		}
		return s.refuseAdmitted(adm, c, consent, ref, why+ref.Reason)
	}
	if err != nil {
		return reserveFailed(&msg.Dispatch{Attempt: c.Attempt}, err, s.log)
	}
	failpoint.Hit(FailAfterReserve)
	return s.deliverReserved(rt, c, adm, consent)
}

// deliverReserved delivers an attempt whose reservation is durable and
// journals its end: not sent, uncertain, or the application's answer.
func (s *Store) deliverReserved(rt *msg.RouteRecord, c *hostlog.CheckedDispatch, adm *admission, consent []byte) msg.DispatchResult {
	var dl Delivery
	cutoff := c.Cutoff(s.deadlineClock())
	if c.Kind == msg.KindList && (len(adm.grant.Operations) > 0 || len(adm.agentOps) > 0) {
		dl = s.deliverFiltered(rt, c.List, adm.listFilter(), cutoff)
	} else {
		dl = s.daemon.Deliver(rt, c.Req, cutoff)
	}
	if dl.Sent && dl.Err == "" && dl.Cause != nil {
		// An answer the host made itself (a listing it would not filter).
		s.log.Warn("steward-operator: filtered listing", "attempt", c.Attempt, "err", dl.Cause)
	}
	switch {
	case !dl.Sent:
		s.log.Warn("steward-operator: not sent", "attempt", c.Attempt, "upstream", rt.Upstream, "err", dl.Cause)
		receipt, err := s.commitNotSent(adm, c, consent, dl.Detail)
		if err != nil {
			// The reservation is durable and its release is not (or not
			// known to be): charged until the operator resolves it.
			s.log.Error("steward-operator: not-sent record", "attempt", c.Attempt, "err", err)
			return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateUncertain,
				Detail: "delivery failed before sending (" + dl.Detail + ") but the host could not journal the release"}
		}
		failpoint.Hit(FailAfterNotSent)
		return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateNotSent, Detail: dl.Detail, Receipt: receipt}
	case dl.Err != "":
		s.log.Warn("steward-operator: uncertain", "attempt", c.Attempt, "upstream", rt.Upstream, "err", dl.Cause)
		s.commitUncertain(adm, dl.Err, s.log)
		return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateUncertain, Detail: dl.Err}
	}

	body := dl.Body
	receipt, err := s.commitOutcome(adm, c, consent, dl.Status, body)
	if err != nil {
		s.log.Error("steward-operator: outcome record", "attempt", c.Attempt, "err", err)
		s.commitUncertain(adm, "the host could not journal the answer", s.log)
		return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateUncertain,
			Detail: "the application answered but the host could not journal the outcome"}
	}
	failpoint.Hit(FailAfterOutcome)
	res := msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateDefinite, Status: dl.Status, Body: body, Receipt: receipt}
	if c.Kind != msg.KindInvoke {
		price := adm.grant.Price
		res.CallPrice = &price
	}
	return res
}

// errConsentDeadline wraps a consent wait that the dispatch's deadline
// (plus msg.DeadlineTolerance) ended: the call is refused as past its deadline.
var errConsentDeadline = errors.New("the dispatch's deadline passed during the consent wait")

// refuseAdmitted ends an admitted attempt refused before anything was
// reserved: a refused record with its receipt (reason says how it ended),
// and ref answered with the receipt. Nothing was reserved, so nothing is
// charged whatever became of the record; when it failed the agent is told
// what is known of it: a record the journal removed is not there (nothing
// of the attempt is recorded), one whose fdatasync failed is known only
// once the host has restarted.
func (s *Store) refuseAdmitted(adm *admission, c *hostlog.CheckedDispatch, consent []byte, ref *msg.Refusal, reason string) msg.DispatchResult {
	receipt, err := s.commitRefused(adm, c, consent, reason)
	if err != nil {
		s.log.Error("steward-operator: refused record; nothing sent or charged", "attempt", c.Attempt, "err", err)
		ref.Reason += refusalUnrecorded(err)
		return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateRefused, Refusal: ref}
	}
	failpoint.Hit(FailAfterRefused)
	return msg.DispatchResult{Attempt: c.Attempt, Outcome: msg.StateRefused, Refusal: ref, Receipt: receipt}
}

// refusalUnrecorded is what a refusal after admission adds when its
// record failed: nothing was reserved, so nothing is charged either way,
// but a record the journal removed is not there, and one whose fdatasync
// failed is known only once the host has restarted.
func refusalUnrecorded(err error) string {
	if errors.Is(err, journal.ErrNotWritten) {
		return "; the host could not record this refusal's receipt, so nothing of the attempt is recorded"
	}
	return "; the host journal failed while recording this refusal's receipt: whether it is recorded is known only once the host has restarted"
}

// noConsentReceiptReason is the receipt's reason for an attempt whose
// consent did not come: the payer's own refusal, or that it could not be
// obtained (the cause, which may name a host path, stays in the log).
func noConsentReceiptReason(err error) string {
	var pr *PayerRefusal
	if errors.As(err, &pr) {
		return "the payer refused: " + hostlog.QuoteLine(pr.Refusal.Error(), maxPayerReason)
	}
	return "refused before consent: the payer's consent could not be obtained"
}

// noConsentReason is what the agent learns of a consent that did not
// come: the payer's own refusal, which is the controller's word and names
// the payer's limit, or that the consent could not be obtained (the cause,
// which may name the reverse socket, is in the host's log).
func noConsentReason(err error) string {
	var pr *PayerRefusal
	if errors.As(err, &pr) {
		return "the payer refused consent: " + pr.Refusal.Error()
	}
	return "the payer's consent could not be obtained"
}

// consent asks the controller, through the daemon's Payer, for the payer's
// signed consent to adm's charge and verifies it against the controller's
// pinned dispatch key: the daemon carries the consent, it does not vouch
// for it.
//
// The wait ends on the reverse channel's answer or failure, or after
// ReserveTimeout or at the dispatch's deadline plus msg.DeadlineTolerance,
// whichever is sooner; not when ctx is cancelled, which happens when the
// dispatch's forward channel closes or the host shuts down. A controller
// that consents and dies at once has its consent already queued on the
// reverse socket while its forward socket reports EOF: whether the host
// acts on a consent it was given must not depend on which of the two
// sockets it happens to read first. A controller that died before
// consenting fails the reverse channel too, so nothing waits for the
// timeout; a shutdown drains the wait like the delivery that follows it.
func (s *Store) consent(ctx context.Context, rt *msg.RouteRecord, c *hostlog.CheckedDispatch, adm *admission) (consent []byte, err error) {
	by, byDeadline := time.Now().Add(ReserveTimeout), false
	if cut := c.Cutoff(s.deadlineClock()); !cut.IsZero() && cut.Before(by) {
		by, byDeadline = cut, true
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	defer func() {
		if err != nil && byDeadline && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", errConsentDeadline, err)
		}
	}()
	// The reserve cites the signed grant the call was admitted under, so
	// the controller can check the charge against the operator's own word
	// (a grant's signed bytes never change once stored).
	r := msg.Reserve{
		V: msg.CustodyV2, Attempt: c.Attempt, Controller: adm.ctrl.Name, Application: c.Application,
		Operation: c.Operation, RequestSHA256: c.SHA[:], Charge: adm.charge, RefusalPrice: adm.refusalPrice(),
		Grant: adm.g.Signed,
	}
	signed, err := s.daemon.Consent(ctx, rt, adm.ctrl.peer(), r)
	if err != nil {
		return nil, err
	}
	cons, err := msg.VerifyConsent(signed, adm.ctrl.dispRing, r)
	if err != nil {
		return nil, err
	}
	if err := checkPrincipal(c, cons, signed); err != nil {
		return nil, err
	}
	return signed, nil
}

// reserveFailed answers a dispatch whose reservation record could not be
// appended. Nothing was delivered either way. A record the journal removed
// (or never wrote) charged nothing: a refusal. After a failed fdatasync
// (journal.ErrFailed) the record may be on disk when the host restarts and
// reads what is really there, so the charge is unknown: the attempt is
// uncertain, never "nothing charged", lest a retry be charged twice.
func reserveFailed(d *msg.Dispatch, err error, log *slog.Logger) msg.DispatchResult {
	if errors.Is(err, journal.ErrFailed) {
		log.Error("steward-operator: reserve record: the journal failed; whether the reservation is on disk is unknown until the host restarts; nothing was sent", "attempt", d.Attempt, "err", err)
		return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateUncertain,
			Detail: "the host journal failed while recording the reservation: nothing was sent to the application, and whether it is reserved is known only once the host has restarted"}
	}
	log.Error("steward-operator: reserve record; nothing sent or charged", "attempt", d.Attempt, "err", err)
	return refused(d, msg.CodeJournal, "the host could not journal the reservation; nothing was sent or charged")
}
