package host

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The approvals socket (DESIGN.md section 9, "Approvals"): `serve
// --approvals-socket PATH --approvers-group GROUP` serves the approvals
// verbs, and only those, to the members of GROUP, from their own
// accounts. The socket is mode 0660 and has group GROUP from the moment
// it exists: its directory must give it that group (setgid to GROUP, as
// the installer makes the host's socket directories), since the host
// never chmods or chowns a socket after listen. At accept the peer's
// SO_PEERCRED uid must be the host's own or an account whose groups (the
// group database, not the process's supplementary groups) include GROUP:
// a process that kept the group after its account left it is refused
// with a signed refusal frame.
//
// An approver holds no key the host pins, and cannot read the host's
// public key in its 0700 store. Both ends know who the other is from the
// kernel instead (the host from SO_PEERCRED at accept; the approver from
// SO_PEERCRED at dial, wire.Dial with the host account's uid), so each
// tells the other its Ed25519 public key in one unsigned frame before the
// usual signed handshake: the host's key first, then the approver's, made
// for this one connection. A refused peer gets the host's key frame and
// then the signed refusal, so it can read why.

// Bounds of the approvals socket: several approvers at once, a few
// connections each (a watch and an answer).
const (
	approvalsMaxConns  = 32
	approvalsMaxPerUID = 4
)

// approvalsOnly is the one line every other operation gets there.
const approvalsOnly = "the approvals socket serves only the approvals verbs"

// approversGroup resolves the group of `serve --approvers-group`.
func approversGroup(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("approvers group %s: %w", name, err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("approvers group %s: gid %q: %w", name, g.Gid, err)
	}
	return uint32(gid), nil
}

// socketGroupAt is the group a socket created in dir gets: the
// directory's own when it is setgid, else this process's.
func socketGroupAt(dir string) (uint32, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	if fi.Mode()&os.ModeSetgid != 0 {
		return fi.Sys().(*syscall.Stat_t).Gid, nil
	}
	return uint32(os.Getegid()), nil
}

// approverCheck is who the approvals socket serves: the host's own uid
// and the accounts the group database puts in group gid (named group).
type approverCheck struct {
	self, gid uint32
	group     string
}

// admitApprover admits the host's own uid and any uid whose account is in
// group gid (named group in the refusal).
func admitApprover(self, gid uint32, group string) func(wire.PeerCred) error {
	ac := approverCheck{self: self, gid: gid, group: group}
	return func(pc wire.PeerCred) error { return ac.check(pc.UID) }
}

// check is nil when uid is the host's own or its account is in the group
// by the group database as it is now (os/user reads it at every call:
// nothing is cached), else why not, wrapping wire.ErrWrongPeer.
func (ac approverCheck) check(uid uint32) error {
	if uid == ac.self {
		return nil
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return fmt.Errorf("%w: peer uid %d has no account, so it is not in the approvers group %s", wire.ErrWrongPeer, uid, ac.group)
	}
	gids, err := u.GroupIds()
	if err != nil || !slices.Contains(gids, strconv.FormatUint(uint64(ac.gid), 10)) {
		return fmt.Errorf("%w: peer uid %d (%s) is not in the approvers group %s", wire.ErrWrongPeer, uid, u.Username, ac.group)
	}
	return nil
}

// listenApprovals binds the approvals socket at path for the members of
// group, or returns nil when path is empty. The socket's group is checked
// before it is made (and once more after): a directory that would give it
// another group is refused, never repaired.
func (h *Host) listenApprovals(path, group string) (*wire.Listener, error) {
	if path == "" {
		if group != "" {
			return nil, views.Refusedf("--approvers-group %s without --approvals-socket", group)
		}
		return nil, nil
	}
	if group == "" {
		return nil, views.Refusedf("approvals socket %s: --approvers-group GROUP is required", path)
	}
	gid, err := approversGroup(group)
	if err != nil {
		return nil, views.Refusedf("%v", err)
	}
	dir := filepath.Dir(path)
	if got, err := socketGroupAt(dir); err != nil {
		return nil, fmt.Errorf("approvals socket %s: %w", path, err)
	} else if got != gid {
		return nil, views.Refusedf("approvals socket %s would have gid %d, not group %s (gid %d): make %s setgid to group %s", path, got, group, gid, dir, group)
	}
	key := h.key
	h.approvers = approverCheck{self: uint32(os.Geteuid()), gid: gid, group: group}
	l, err := wire.Listen(wire.ListenConfig{
		Path: path, Mode: 0o660,
		Allow:    admitApprover(uint32(os.Geteuid()), gid, group),
		MaxConns: approvalsMaxConns, MaxPerUID: approvalsMaxPerUID,
		Refuse: func(c *net.UnixConn, reason error) {
			if admin.WriteKeyFrame(c, key.Public()) == nil {
				wire.RefuseFrame(key)(c, reason)
			}
		},
		Logger: h.log,
	})
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Gid != gid {
		l.Close()
		return nil, fmt.Errorf("approvals socket %s: not group %s after listen (gid %d, %v)", path, group, st.Gid, err)
	}
	return l, nil
}

// approvalsChannel is the handshake of the approvals socket at path with
// the approver's key of this connection.
func (h *Host) approvalsChannel(path string, peer *wire.PublicKey) wire.ChannelConfig {
	return wire.ChannelConfig{
		Key: h.key, Role: admin.RoleApprovals, PeerRole: admin.RoleApprovalsClient, PeerKeys: wire.NewKeyring(peer),
		Path: path, Purpose: admin.PurposeApprovals,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
}

// approvalsLoop serves the approvals socket until it closes: the key
// frames, the handshake, then the approvals verbs on the admin handler,
// each connection as acceptLoop serves the admin socket's.
func (h *Host) approvalsLoop(ctx context.Context, l *wire.Listener) {
	h.acceptLoopWith(ctx, l, h.approvalsHandler(), adminIdleTimeout, func(pc *wire.PeerConn) (*wire.Channel, error) {
		if err := admin.WriteKeyFrame(pc, h.key.Public()); err != nil {
			return nil, err
		}
		peer, err := admin.ReadKeyFrame(pc)
		if err != nil {
			return nil, err
		}
		return wire.ServerHandshake(pc, h.approvalsChannel(l.Path(), peer))
	})
}

// approvalsHandler is the admin handler for the approvals operations
// alone: anything else is refused with one line, before it is looked at.
// Every request checks first that the peer's account is still in the
// approvers' group by the group database as it is now, not only at
// accept: an account removed from the group (gpasswd -d) while its
// connection stays open is refused, and the connection closed, at its
// next request.
func (h *Host) approvalsHandler() wire.Handler {
	hd := h.adminHandler()
	return wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		pc, ok := peerOf(ctx)
		if !ok {
			return msg.TypeRefused, wire.Last{Body: msg.Refusal{Code: admin.CodeRefusedInput, Reason: "the connection names no peer"}}
		}
		if err := h.approvers.check(pc.UID); err != nil {
			h.log.Warn("steward-operator: approvals request refused: the peer left the approvers group; closing its connection", "uid", pc.UID, "group", h.approvers.group)
			why := strings.TrimPrefix(err.Error(), wire.ErrWrongPeer.Error()+": ")
			return msg.TypeRefused, wire.Last{Body: msg.Refusal{Code: admin.CodeRefusedInput, Reason: why + " any more; the connection is closed"}}
		}
		var ar admin.Request
		if req.T != admin.TypeAdmin || req.Decode(&ar) != nil || !admin.IsApprovalsOp(ar.Op) {
			return msg.TypeRefused, msg.Refusal{Code: admin.CodeRefusedInput, Reason: approvalsOnly}
		}
		return hd.ServeFrame(ctx, req)
	})
}
