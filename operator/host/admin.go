package host

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// peerKey carries an admin connection's SO_PEERCRED in its handlers' context.
type peerKey struct{}

// withPeer returns ctx carrying the kernel's word on the connection's peer.
func withPeer(ctx context.Context, pc wire.PeerCred) context.Context {
	return context.WithValue(ctx, peerKey{}, pc)
}

// peerOf returns the peer withPeer put in ctx.
func peerOf(ctx context.Context) (wire.PeerCred, bool) {
	pc, ok := ctx.Value(peerKey{}).(wire.PeerCred)
	return pc, ok
}

// The admin socket (DESIGN.md section 9): the operator's commands reach the
// running host here, in the admin language (package admin), as the host's
// own account, when the journal's lock keeps them from the store.

// doAdmin runs one admin socket request. A resolution and a route change
// name who asked from the connection's SO_PEERCRED, never from the request, and a
// redelivery is the host's own work (it delivers to the application).
func (h *Host) doAdmin(ctx context.Context, ar admin.Request) (admin.Reply, error) {
	pc, ok := peerOf(ctx)
	if !ok {
		return admin.Reply{}, fmt.Errorf("the admin connection has no peer credentials")
	}
	ar.By = fmt.Sprintf("uid:%d", pc.UID) // a route change's and an answer's
	if ar.Approvals != nil {
		ar.Approvals.Account = admin.AccountName(pc.UID) // an answer's
		if ar.Op == admin.OpApprovalsEvents {
			// Its wait ends with the connection or the host's shutdown.
			return admin.Events(ctx, h.s, *ar.Approvals)
		}
	}
	if ar.Resolve != nil {
		ar.Resolve.By = ar.By
		if ar.Op == admin.OpAttemptResolve && ar.Resolve.Action == views.ResolveRedeliver {
			v, err := h.redeliver(*ar.Resolve)
			if err != nil {
				return admin.Reply{}, err
			}
			return admin.Reply{Attempt: &v}, nil
		}
	}
	rep, err := admin.Do(h.s, ar)
	if err == nil && (ar.Op == admin.OpControllerAdd || ar.Op == admin.OpControllerControl) {
		rep.ControlListened = true // the change took effect on this host's sockets
	}
	return rep, err
}

// redeliver is the store's redelivery (operator.Store.Redeliver) counted
// as the host's work: a shutdown waits for it.
func (h *Host) redeliver(req views.ResolveRequest) (views.AttemptView, error) {
	if !h.enter() {
		return views.AttemptView{}, fmt.Errorf("%w: the host is shutting down; nothing was sent", views.ErrRefused)
	}
	defer h.leave()
	return h.s.Redeliver(req)
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
		Key: h.key, Role: admin.RoleAdmin, PeerRole: admin.RoleAdminClient, PeerKeys: h.s.HostKeyring(),
		Path: h.adminPath, Purpose: admin.PurposeAdmin,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
}

func (h *Host) adminHandler() wire.Handler {
	return fitReplies(wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		if req.T != admin.TypeAdmin {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: fmt.Sprintf("unknown request type %q on the admin socket", req.T)}
		}
		var ar admin.Request
		if err := req.Decode(&ar); err != nil {
			return msg.TypeRefused, msg.Refusal{Code: admin.CodeRefusedInput, Reason: err.Error()}
		}
		rep, err := h.doAdmin(ctx, ar)
		if err != nil {
			code := msg.CodeInternal
			if errors.Is(err, views.ErrRefused) {
				code = admin.CodeRefusedInput
			}
			return msg.TypeRefused, msg.Refusal{Code: code, Reason: err.Error()}
		}
		if ar.Op == admin.OpApprovalsEvents {
			return admin.TypeAdminResult, rep // a watch's follow, every few seconds: its events are logged as they happen
		}
		// Who asked is the connection's peer, as in a route change's record.
		pc, _ := peerOf(ctx)
		h.log.Info("steward-operator: admin", "op", ar.Op, "name", ar.Name, "by", fmt.Sprintf("uid:%d", pc.UID))
		return admin.TypeAdminResult, rep
	}))
}
