package admin

import (
	"context"
	"time"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// doAttempt runs the attempt operations of Do.
func doAttempt(s *operator.Store, req Request) (Reply, error) {
	var rep Reply
	switch req.Op {
	case OpAttemptList:
		v, left, err := s.Attempts(msg.State(req.Name))
		if err != nil {
			return rep, err
		}
		rep.Attempts, rep.AttemptsLeftOff = v, left
	case OpAttemptInspect:
		v, err := s.AttemptInspect(req.Name)
		if err != nil {
			return rep, err
		}
		rep.Attempt = &v
	default:
		if req.Resolve == nil {
			return rep, views.Refusedf("attempt resolve without a request")
		}
		v, err := s.SettleAttempt(*req.Resolve)
		if err != nil {
			return rep, err
		}
		rep.Attempt = &v
	}
	return rep, nil
}

// Do runs one request on store s: one a command opened itself, or the
// running host's, which sets who asks (Request.By, ApprovalsRequest.Account)
// from the connection's SO_PEERCRED before it calls Do, and runs a
// redelivery and an events request's wait itself.
func Do(s *operator.Store, req Request) (Reply, error) {
	var rep Reply
	switch req.Op {
	case OpControllerAdd:
		v, err := s.AddController(req.Name, req.UID, req.Keys, req.Control)
		if err != nil {
			return rep, err
		}
		rep.Controller = &v
	case OpControllerControl:
		v, changed, err := s.SetControllerControl(req.Name, req.Control)
		if err != nil {
			return rep, err
		}
		rep.Controller, rep.ControlUnchanged = &v, !changed
	case OpPurseFund, OpPurseFreeze, OpPurseThaw:
		var v views.PurseView
		var err error
		switch req.Op {
		case OpPurseFund:
			v, err = s.FundPurse(req.Name, req.Amount)
		case OpPurseFreeze:
			v, err = s.Freeze(req.Name)
		default:
			v, err = s.Thaw(req.Name)
		}
		if err != nil {
			return rep, err
		}
		rep.Purse = &v
	case OpGrantIssue:
		if req.Grant == nil {
			return rep, views.Refusedf("grant issue without a grant")
		}
		g := req.Grant
		spec := views.GrantSpec{Controller: g.Controller, Application: g.Application, Operations: g.Operations,
			Price: g.Price, DiscoveryPrice: g.DiscoveryPrice, RefusalPrice: g.RefusalPrice, PerDay: g.PerDay, NotAfter: time.UnixMilli(g.NotAfter)}
		if g.NotBefore != 0 {
			spec.NotBefore = time.UnixMilli(g.NotBefore)
		}
		v, err := s.IssueGrant(spec)
		if err != nil {
			return rep, err
		}
		rep.Grant = &v
	case OpGrantRevoke:
		if err := s.RevokeGrant(req.Name); err != nil {
			return rep, err
		}
	case OpRouteRegister:
		if req.Route == nil {
			return rep, views.Refusedf("route register without a request")
		}
		v, err := s.RegisterRouteAs(req.Name, req.App, *req.Route, views.RouteRegistration{Inactive: req.Inactive, By: req.By})
		if err != nil {
			return rep, err
		}
		rep.Route = &v
	case OpRouteActivate, OpRouteDeactivate, OpRouteRemove:
		v, changed, err := s.SetRouteState(req.Name, routeOpState[req.Op], req.By)
		if err != nil {
			return rep, err
		}
		rep.Route, rep.RouteUnchanged = &v, !changed
	case OpAttemptList, OpAttemptInspect, OpAttemptResolve:
		return doAttempt(s, req)
	case OpApprovalsList, OpApprovalsShow, OpApprovalsRespond, OpApprovalsEvents:
		return doApprovals(s, req)
	case OpHistorySnapshot, OpHistoryArchive, OpClockAccept:
		return doStore(s, req)
	case OpAgentSet:
		if req.Agent == nil {
			return rep, views.Refusedf("agent set without limits")
		}
		v, err := s.SetAgentLimits(*req.Agent)
		if err != nil {
			return rep, err
		}
		rep.Agent = &v
	default:
		return rep, views.Refusedf("unknown admin operation %q", req.Op)
	}
	return rep, nil
}

// doApprovals runs an approvals operation on the store. A respond is
// answered by req.By and Approvals.Account, which the running host sets
// from the connection's SO_PEERCRED and a command on the store from its
// own account.
func doApprovals(s *operator.Store, req Request) (Reply, error) {
	ar := req.Approvals
	if ar == nil {
		return Reply{}, views.Refusedf("%s without its request", req.Op)
	}
	var rep ApprovalsReply
	switch req.Op {
	case OpApprovalsList:
		asks, next, err := s.AskListPage(ar.All, ar.After)
		if err != nil {
			return Reply{}, err
		}
		rep.Asks, rep.Cursor = asks, next
	case OpApprovalsShow:
		v, err := s.AskShow(ar.Ask)
		if err != nil {
			return Reply{}, err
		}
		rep.Ask = &v
	case OpApprovalsRespond:
		if err := ar.CheckRespond(); err != nil {
			return Reply{}, err
		}
		v, err := s.AnswerAsk(ar.Ask, views.Answer{Verdict: ar.Verdict, By: req.By, Account: ar.Account, Note: ar.Note})
		if err != nil {
			return Reply{}, err
		}
		rep.Ask = &v
	case OpApprovalsEvents:
		// A store a command opened: no shutdown to wait for.
		return Events(context.Background(), s, *ar)
	}
	return Reply{Approvals: &rep}, nil
}

// Events answers an events request on s, its wait ended early by ctx
// (the running host's shutdown, or the watch's connection closing).
func Events(ctx context.Context, s *operator.Store, ar ApprovalsRequest) (Reply, error) {
	wait := time.Duration(ar.WaitMs) * time.Millisecond
	if ar.WaitMs < 0 || wait > MaxEventsWait {
		return Reply{}, views.Refusedf("approvals events: a wait of %dms, the bound is %v", ar.WaitMs, MaxEventsWait)
	}
	evs, cursor, err := s.AskEvents(ctx, ar.After, wait)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Approvals: &ApprovalsReply{Events: evs, Cursor: cursor}}, nil
}
