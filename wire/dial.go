package wire

import (
	"context"
	"fmt"
	"net"
)

// Dial checks path with CheckSocketPath(path, ownerUID), connects, and
// requires that SO_PEERCRED names peerUID (else ErrWrongPeer). The path check
// is by name and so could race with a swap; the SO_PEERCRED check is on the
// connected socket and cannot.
func Dial(ctx context.Context, path string, ownerUID, peerUID uint32) (*net.UnixConn, error) {
	return dialChecked(ctx, path, ownerUID, func(uid uint32) bool { return uid == peerUID },
		fmt.Sprintf("want uid %d", peerUID))
}

// dialChecked checks path with CheckSocketPath(path, ownerUID), connects,
// and requires that SO_PEERCRED names a uid that listener admits (else
// ErrWrongPeer, ending with want).
func dialChecked(ctx context.Context, path string, ownerUID uint32, listener func(uint32) bool, want string) (*net.UnixConn, error) {
	if err := CheckSocketPath(path, ownerUID); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("wire: dial %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	cred, err := PeerCredOf(uc)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("wire: dial %s: %w", path, err)
	}
	if !listener(cred.UID) {
		uc.Close()
		return nil, fmt.Errorf("%w: dial %s: listener is uid %d (pid %d), %s", ErrWrongPeer, path, cred.UID, cred.PID, want)
	}
	return uc, nil
}

// DialOwned connects to a socket that either its owner bound itself or
// systemd created for it from a .socket unit. It checks path with
// CheckSocketPath(path, ownerUID), connects, and requires that SO_PEERCRED
// names ownerUID or root (else ErrWrongPeer).
//
// Why root is admitted here and nowhere else: SO_PEERCRED on a connection
// to a listener reports the credentials of whoever called listen(2), and
// for a socket-activated listener that is systemd (pid 1, uid 0), not the
// daemon that will accept. The path check has already shown that the socket
// file belongs to ownerUID and that only root, this process or ownerUID
// can replace any directory above it, so a root listener there is systemd
// acting for ownerUID (root can act as anyone anyway). Use it only where
// the socket's owner is who the caller means to reach and where nothing
// handed over depends on the accepting process being that account rather
// than root: the installer's foreground socket, the agents' MCP socket.
// Custody sockets, on which the host hands the controller a reservation,
// use Dial, and the controller binds its reverse socket itself.
func DialOwned(ctx context.Context, path string, ownerUID uint32) (*net.UnixConn, error) {
	return dialChecked(ctx, path, ownerUID, func(uid uint32) bool { return uid == ownerUID || uid == 0 },
		fmt.Sprintf("want uid %d or systemd's uid 0", ownerUID))
}
