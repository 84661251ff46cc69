package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Admin socket protocol: roles, purpose and frame types.
const (
	RoleAdmin        = "operator-admin"
	RoleAdminClient  = "operator-admin-client"
	PurposeAdmin     = "admin"
	TypeAdmin        = "admin"
	TypeAdminResult  = "admin-result"
	codeRefusedInput = "refused-input"
)

// Admin operations.
const (
	OpControllerAdd = "controller-add"
	OpPurseFund     = "purse-fund"
	OpPurseFreeze   = "purse-freeze"
	OpPurseThaw     = "purse-thaw"
	OpGrantIssue    = "grant-issue"
	OpGrantRevoke   = "grant-revoke"
	OpRouteRegister = "route-register"
	// The attempt operations (attempts.go): Name is the state filter of a
	// list and the attempt of an inspect; a resolve carries Resolve.
	OpAttemptList    = "attempt-list"
	OpAttemptInspect = "attempt-inspect"
	OpAttemptResolve = "attempt-resolve"
)

// OpControllerControl sets a controller's control socket (Control): one
// added before `controller add` recorded it, or a new one (control.go).
// Through the running host, it and OpControllerAdd take effect at once
// (Store.mutateControl).
const OpControllerControl = "controller-control"

// AdminRequest is one administrative mutation, run by Store.Do directly or
// by the running daemon for a command that found the journal locked.
type AdminRequest struct {
	Op     string        `cbor:"op"`
	Name   string        `cbor:"name"` // controller, grant id or route
	App    string        `cbor:"app"`
	UID    uint32        `cbor:"uid"`
	Amount uint64        `cbor:"amount"`
	Keys   []byte        `cbor:"keys"`
	Grant  *AdminGrant   `cbor:"grant"`
	Route  *RouteRequest `cbor:"route"`
	// Resolve is an attempt resolve's decision.
	Resolve *ResolveRequest `cbor:"resolve"`
	// Agent is an agent set's limits (agent_admin.go).
	Agent *AgentSpec `cbor:"agent"`
	// By is who asks a route change (route_admin.go): the running host
	// sets it from the admin connection's SO_PEERCRED ("uid:N"), never
	// from what the request says; the command sets its own account for a
	// store it opens itself.
	By string `cbor:"by,omitempty"`
	// Inactive registers a new route inactive (`route register --inactive`).
	Inactive bool `cbor:"inactive,omitempty"`
	// Control is a controller's control socket (controller add,
	// controller control); omitted when empty, as before it.
	Control string `cbor:"control,omitempty"`
	// Approvals is an approvals operation's request (approvals_admin.go).
	Approvals *ApprovalsRequest `cbor:"approvals,omitempty"`
}

// AdminGrant is a GrantSpec with times in unix ms (for CBOR).
type AdminGrant struct {
	Controller     string   `cbor:"controller"`
	Application    string   `cbor:"application"`
	Operations     []string `cbor:"operations"`
	Price          uint64   `cbor:"price"`
	DiscoveryPrice uint64   `cbor:"discoveryPrice"`
	RefusalPrice   uint64   `cbor:"refusalPrice,omitempty"`
	PerDay         uint64   `cbor:"perDay"`
	NotBefore      int64    `cbor:"notBefore"`
	NotAfter       int64    `cbor:"notAfter"`
}

// AdminReply is the result of an AdminRequest; one member is set.
type AdminReply struct {
	Controller *ControllerView `cbor:"controller"`
	Purse      *PurseView      `cbor:"purse"`
	Grant      *GrantView      `cbor:"grant"`
	Route      *RouteView      `cbor:"route"`
	Attempts   []AttemptView   `cbor:"attempts"`
	// AttemptsLeftOff counts the earlier attempts a list left off.
	AttemptsLeftOff int          `cbor:"attemptsLeftOff"`
	Attempt         *AttemptView `cbor:"attempt"`
	Agent           *AgentView   `cbor:"agent"`
	// RouteUnchanged says a route activation or deactivation found the
	// route in that state already: nothing was journaled.
	RouteUnchanged bool `cbor:"routeUnchanged,omitempty"`
	// ControlUnchanged says a controller control named the controller's
	// control socket already: nothing was journaled.
	ControlUnchanged bool `cbor:"controlUnchanged,omitempty"`
	// ControlListened says a controller add or control ran on the running
	// host, which listens on the control socket from now on; false when it
	// ran on the store, which the host listens on when it starts.
	ControlListened bool `cbor:"controlListened,omitempty"`
	// Approvals is an approvals operation's answer (approvals_admin.go).
	Approvals *ApprovalsReply `cbor:"approvals,omitempty"`
}

// Admin runs administrative requests: a *Store, or the daemon's admin socket.
type Admin interface {
	Do(AdminRequest) (AdminReply, error)
	Close() error
}

// Do runs one administrative request on the store.
func (s *Store) Do(req AdminRequest) (AdminReply, error) {
	var rep AdminReply
	switch req.Op {
	case OpControllerAdd:
		v, err := s.AddController(req.Name, req.UID, req.Keys, req.Control)
		if err != nil {
			return rep, err
		}
		rep.Controller, rep.ControlListened = &v, s.controls != nil
	case OpControllerControl:
		v, changed, err := s.SetControllerControl(req.Name, req.Control)
		if err != nil {
			return rep, err
		}
		rep.Controller, rep.ControlUnchanged, rep.ControlListened = &v, !changed, s.controls != nil
	case OpPurseFund, OpPurseFreeze, OpPurseThaw:
		var v PurseView
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
			return rep, refusedf("grant issue without a grant")
		}
		g := req.Grant
		spec := GrantSpec{Controller: g.Controller, Application: g.Application, Operations: g.Operations,
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
			return rep, refusedf("route register without a request")
		}
		v, err := s.RegisterRouteAs(req.Name, req.App, *req.Route, RouteRegistration{Inactive: req.Inactive, By: req.By})
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
		return s.doAttempt(req)
	case OpApprovalsList, OpApprovalsShow, OpApprovalsRespond, OpApprovalsEvents:
		return s.doApprovals(req)
	case OpAgentSet:
		if req.Agent == nil {
			return rep, refusedf("agent set without limits")
		}
		v, err := s.SetAgentLimits(*req.Agent)
		if err != nil {
			return rep, err
		}
		rep.Agent = &v
	default:
		return rep, refusedf("unknown admin operation %q", req.Op)
	}
	return rep, nil
}

// The admin socket's bounds. Its one peer account is the daemon's own (the
// operator's commands, one request each), and its next connection may be
// the kill switch (purse freeze, grant revoke), so it never refuses a new
// connection for one that has not proven itself: past adminMaxConns the
// oldest connection still in its handshake is closed to make room
// (wire.ListenConfig.EvictSilent). A connection that has proven itself
// holds its slot only while it is busy or for adminIdleTimeout after its
// last reply.
const adminMaxConns = 8

// adminIdleTimeout bounds an admin channel's quiet between requests: the
// handshake's bound, as a command sends its request right after it. A
// variable so that a test can shorten it.
var adminIdleTimeout = wire.DefaultHandshakeTimeout

func (h *Host) listenAdmin() (*wire.Listener, error) {
	uid := uint32(os.Geteuid())
	return wire.Listen(wire.ListenConfig{
		Path: h.adminPath, Mode: 0o600,
		Allow: func(pc wire.PeerCred) error {
			if pc.UID != uid {
				return fmt.Errorf("%w: peer uid %d is not the daemon's uid %d", wire.ErrWrongPeer, pc.UID, uid)
			}
			return nil
		},
		MaxConns: adminMaxConns, MaxPerUID: adminMaxConns, EvictSilent: true,
		Refuse: wire.RefuseFrame(h.key),
	})
}

func (h *Host) adminChannelConfig() wire.ChannelConfig {
	return wire.ChannelConfig{
		Key: h.key, Role: RoleAdmin, PeerRole: RoleAdminClient, PeerKeys: h.s.hostRing,
		Path: h.adminPath, Purpose: PurposeAdmin,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
}

func (h *Host) adminHandler() wire.Handler {
	return wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		if req.T != TypeAdmin {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: fmt.Sprintf("unknown request type %q on the admin socket", req.T)}
		}
		var ar AdminRequest
		if err := req.Decode(&ar); err != nil {
			return msg.TypeRefused, msg.Refusal{Code: codeRefusedInput, Reason: err.Error()}
		}
		rep, err := h.doAdmin(ctx, ar)
		if err != nil {
			code := msg.CodeInternal
			if errors.Is(err, ErrRefused) {
				code = codeRefusedInput
			}
			return msg.TypeRefused, msg.Refusal{Code: code, Reason: err.Error()}
		}
		if ar.Op == OpApprovalsEvents {
			return TypeAdminResult, rep // a watch's follow, every few seconds: its events are logged as they happen
		}
		// Who asked is the connection's peer, as in a route change's record.
		pc, _ := peerOf(ctx)
		h.log.Info("steward-operator: admin", "op", ar.Op, "name", ar.Name, "by", fmt.Sprintf("uid:%d", pc.UID))
		return TypeAdminResult, rep
	})
}

// adminClient is an Admin that reaches the running daemon.
type adminClient struct{ cl *wire.Client }

// DialAdmin connects to the daemon's admin socket in store dir, signing with
// the operator key (read from the store: the caller is the operator).
func DialAdmin(ctx context.Context, dir string) (Admin, error) {
	return dialAdminAt(ctx, dir, adminSocketPath(dir))
}

// dialAdminAt connects to the admin socket at path of the daemon serving
// store dir (ServeOptions.AdminSocket).
func dialAdminAt(ctx context.Context, dir, path string) (Admin, error) {
	key, err := wire.ReadHybridKey(dir + "/" + keyFile)
	if err != nil {
		return nil, err
	}
	uid := uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, path, uid, uid)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDaemonRunning, err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: key.Ed25519(), Role: RoleAdminClient, PeerRole: RoleAdmin, PeerKeys: wire.NewKeyring(key.Public().Ed25519()),
		Path: path, Purpose: PurposeAdmin, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &adminClient{cl: wire.NewClient(ch)}, nil
}

func (a *adminClient) Do(req AdminRequest) (AdminReply, error) {
	return a.doWithin(30*time.Second, req)
}

// doWithin is Do waiting at most d for the daemon's answer.
func (a *adminClient) doWithin(d time.Duration, req AdminRequest) (AdminReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	env, err := a.cl.Call(ctx, TypeAdmin, req)
	if err != nil {
		return AdminReply{}, err
	}
	switch env.T {
	case TypeAdminResult:
		var rep AdminReply
		err := env.Decode(&rep)
		return rep, err
	case msg.TypeRefused:
		var ref msg.Refusal
		if err := env.Decode(&ref); err != nil {
			return AdminReply{}, err
		}
		reason := strings.TrimPrefix(ref.Reason, ErrRefused.Error()+": ")
		if ref.Code == codeRefusedInput {
			return AdminReply{}, fmt.Errorf("%w: %s", ErrRefused, reason)
		}
		return AdminReply{}, fmt.Errorf("the daemon: %s", reason)
	default:
		return AdminReply{}, fmt.Errorf("unexpected %q reply on the admin socket", env.T)
	}
}

func (a *adminClient) Close() error { return a.cl.Close() }

// OpenAdmin opens the store for administration: directly when no daemon
// holds it, else through the running daemon's admin socket. Either way the
// same Store methods run.
func OpenAdmin(ctx context.Context, dir string) (Admin, error) {
	s, err := Open(dir)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, journal.ErrLocked) {
		return nil, err
	}
	return DialAdmin(ctx, dir)
}
