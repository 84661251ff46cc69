package wire

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerCred is the kernel's word on who is at the other end of a Unix socket
// (SO_PEERCRED): the credentials of the peer when it connected or listened.
// Never trust an identity written inside a frame instead.
type PeerCred struct {
	UID, GID uint32
	PID      int32
}

// PeerCredOf reads SO_PEERCRED from c.
func PeerCredOf(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, fmt.Errorf("wire: SO_PEERCRED: %w", err)
	}
	var (
		cred *unix.Ucred
		serr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, fmt.Errorf("wire: SO_PEERCRED: %w", err)
	}
	if serr != nil {
		return PeerCred{}, fmt.Errorf("wire: SO_PEERCRED: %w", serr)
	}
	return PeerCred{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
