package operator

import (
	"bytes"
	"fmt"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Redeliver sends an uncertain attempt's exact request bytes to its
// application again, under the same attempt: no second reservation, no
// second charge. One redeliver record is journaled before the send (who
// and why), then the outcome and its receipt are journaled as for a first
// delivery (commitOutcome). A failure leaves the attempt uncertain, its
// reservation held: nothing is released automatically. The operator may
// redeliver after the dispatch's deadline: it is an explicit decision.
func (s *Store) Redeliver(req views.ResolveRequest) (views.AttemptView, error) {
	a, err := s.beginResolve(req)
	if err != nil {
		return views.AttemptView{}, err
	}
	defer s.endResolve(a)
	rt, adm, c, consent, err := s.redeliveryOf(a)
	if err != nil {
		return views.AttemptView{}, err
	}
	if _, err := s.append(hostlog.KindRedeliver, hostlog.Redeliver{Attempt: a.ID, By: req.By, Reason: req.Reason}); err != nil {
		return views.AttemptView{}, fmt.Errorf("attempt %s: journaling the redelivery: %w; nothing was sent", a.ID, err)
	}
	s.mu.Lock()
	a.Resolution, a.RedeliveredBy = redeliveredLine(req.By, req.Reason), req.By
	s.mu.Unlock()
	adm.resolvedBy = req.By // its receipt names the redeliver record's resolver
	failpoint.Hit(FailAfterRedeliverRecord)

	var dl Delivery
	if c.Kind == msg.KindList && (len(adm.grant.Operations) > 0 || len(adm.agentOps) > 0) {
		dl = s.deliverFiltered(&rt, c.List, adm.listFilter(), time.Time{}) // no deadline: the operator's explicit decision
	} else {
		dl = s.daemon.Deliver(&rt, c.Req, time.Time{})
	}
	if !dl.Sent || dl.Err != "" {
		why := dl.Err
		if !dl.Sent {
			why = dl.Detail + ", nothing was sent this time"
		}
		s.log.Warn("steward-operator: redelivery failed; the attempt stays uncertain", "attempt", a.ID, "upstream", rt.Upstream, "err", dl.Cause)
		s.commitUncertain(adm, "the operator's redelivery failed: "+why, s.log)
		return views.AttemptView{}, fmt.Errorf("attempt %s: the redelivery failed (%s); it stays uncertain and keeps its reservation", a.ID, why)
	}
	if _, err := s.commitOutcome(adm, c, consent, dl.Status, dl.Body); err != nil {
		s.log.Error("steward-operator: outcome record of a redelivery", "attempt", a.ID, "err", err)
		s.commitUncertain(adm, "the application answered the redelivery but the host could not journal the outcome", s.log)
		return views.AttemptView{}, fmt.Errorf("attempt %s: the application answered the redelivery but the host could not journal it: %w; it stays uncertain", a.ID, err)
	}
	s.log.Info("steward-operator: attempt redelivered", "attempt", a.ID, "by", req.By, "status", dl.Status)
	return s.AttemptInspect(a.ID)
}

// redeliveryOf rebuilds what delivering attempt a again needs from its
// reservation: the active route of its application and controller,
// the checked dispatch of its kept request (which must still be the one
// canonical request under that route, with the reserved hash), and an
// admission holding the reservation as it stands, for commitOutcome.
func (s *Store) redeliveryOf(a *attempt) (msg.RouteRecord, *admission, *hostlog.CheckedDispatch, []byte, error) {
	var rt msg.RouteRecord
	s.mu.Lock()
	reserved := a.ReserveAt
	s.mu.Unlock()
	rr, err := s.readReserve(a.ID, reserved)
	if err != nil {
		return rt, nil, nil, nil, err
	}
	if !rr.HasRequest() {
		return rt, nil, nil, nil, views.Refusedf("attempt %s was reserved by a host that did not keep request bytes (a first-version reserve record): it can be released or charged (--release, --charge), not redelivered", a.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	name := st.ActiveFor(rr.Controller, rr.Application, "")
	if name == "" {
		return rt, nil, nil, nil, views.Refusedf("attempt %s: no active route delivers to application %s for controller %s: activate its route to redeliver it (steward-operator route activate ROUTE), or release or charge it", a.ID, rr.Application, rr.Controller)
	}
	rt = st.Routes[name].Selected().Record
	c, err := hostlog.CheckDispatch(&rt, &msg.Dispatch{Attempt: a.ID, Method: rr.Method, Path: rr.Path, Body: rr.Body, Agent: rr.Agent})
	if err == nil && !bytes.Equal(c.SHA[:], rr.RequestSHA256) {
		err = fmt.Errorf("it does not hash to the reserved request")
	}
	if err != nil {
		return rt, nil, nil, nil, views.Refusedf("attempt %s: its request does not fit route %s as now selected (%v): it can be released or charged, not redelivered", a.ID, rt.Route, err)
	}
	ctrl, g := st.Controllers[a.Controller], st.Grants[a.Grant]
	if ctrl == nil || g == nil {
		return rt, nil, nil, nil, fmt.Errorf("attempt %s: its controller or grant is not in the store", a.ID)
	}
	adm := &admission{a: a, ctrl: ctrl, g: g, grant: g.Grant, charge: a.Charge, day: a.Day, agentOps: s.agentOps(a.Controller, c)}
	return rt, adm, c, rr.Consent, nil
}
