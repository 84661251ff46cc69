// Package admin is the operator's administrative language: the requests
// the steward-operator commands make of a store (Request, Reply, the Op
// constants, the approvals' ApprovalsRequest) and the clients that carry
// them, to the store itself when no host holds it or to the running
// host's admin and approvals sockets.
//
//	c, err := admin.Open(ctx, storeDir) // the store, or the running host's admin socket
//	rep, err := c.Do(admin.Request{Op: admin.OpPurseFreeze, Name: "ctl"})
//
// # What it owns and what it may touch
//
// The request and reply formats (CBOR, as the admin socket carries them),
// the admin socket's protocol (roles, purpose, frame types, its place in
// the store: SocketPath) and the approvals socket's key frames, the
// dialling of both (Dial, DialAt, DialApprovals), and Do, which runs one
// request on a store through the store's own methods. It holds no state
// and decides nothing a store method does not: every check of a change is
// the store's (package operator). The running host (package operator/host)
// serves the sockets and runs Do after setting who asks from SO_PEERCRED.
package admin
