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
	if cred.UID != peerUID {
		uc.Close()
		return nil, fmt.Errorf("%w: dial %s: listener is uid %d (pid %d), want uid %d", ErrWrongPeer, path, cred.UID, cred.PID, peerUID)
	}
	return uc, nil
}
