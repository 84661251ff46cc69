package controller

import (
	"context"
	"strconv"
)

// peerUIDKey is the context key of a session's SO_PEERCRED uid: the
// account of the MCP or advisor session, which the controller tells the
// host (msg.Dispatch.AgentUID, msg.Advise.AdvisorUID) so that no account
// answers an ask its own call raised. The host cannot see that peer: it
// takes the controller's word, as it does for the agent's name.
type peerUIDKey struct{}

// withPeerUID is ctx carrying the session's uid.
func withPeerUID(ctx context.Context, uid uint32) context.Context {
	return context.WithValue(ctx, peerUIDKey{}, uid)
}

// peerUIDOf is the session's account as the host names one, "uid:N", or
// "" for a call with no session peer (the foreground socket).
func peerUIDOf(ctx context.Context) string {
	uid, ok := ctx.Value(peerUIDKey{}).(uint32)
	if !ok {
		return ""
	}
	return "uid:" + strconv.FormatUint(uint64(uid), 10)
}
