package admin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os/user"
	"strconv"
	"time"

	"github.com/stewardrt/steward/wire"
)

// maxKeyFrame bounds an approvals socket's key frame: one COSE_Key.
const maxKeyFrame = 256

// WriteKeyFrame sends pub as one unsigned frame (its COSE_Key).
func WriteKeyFrame(c net.Conn, pub *wire.PublicKey) error {
	return wire.WriteFrame(c, pub.MarshalCOSEKey(), maxKeyFrame)
}

// ReadKeyFrame reads the peer's public key frame within the handshake's bound.
func ReadKeyFrame(c net.Conn) (*wire.PublicKey, error) {
	c.SetReadDeadline(time.Now().Add(wire.DefaultHandshakeTimeout))
	defer c.SetReadDeadline(time.Time{})
	b, err := wire.ReadFrame(c, maxKeyFrame)
	if err != nil {
		return nil, fmt.Errorf("the peer's key frame: %w", err)
	}
	return wire.ParsePublicKey(b)
}

// DialApprovals connects to the approvals socket at path, which the
// account hostAccount must own and listen on (SO_PEERCRED), as an
// approver: the caller's own account, with a key made for this connection.
func DialApprovals(ctx context.Context, path, hostAccount string) (Client, error) {
	u, err := user.Lookup(hostAccount)
	if err != nil {
		return nil, fmt.Errorf("host account %s: %w", hostAccount, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("host account %s: uid %q: %w", hostAccount, u.Uid, err)
	}
	conn, err := wire.Dial(ctx, path, uint32(uid), uint32(uid))
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("the approvals socket %s cannot be reached from this account: its directory admits the approvers' group only (the host's --approvers-group)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("the approvals socket %s: %w", path, err)
	}
	host, err := ReadKeyFrame(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("approvals socket %s: %w", path, err)
	}
	key, err := wire.GenerateSigningKey()
	if err != nil {
		conn.Close()
		return nil, err
	}
	// A refused peer's key frame may meet a closed socket: the handshake
	// then reads the host's signed refusal, which says why.
	_ = WriteKeyFrame(conn, key.Public())
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: key, Role: RoleApprovalsClient, PeerRole: RoleApprovals, PeerKeys: wire.NewKeyring(host),
		Path: path, Purpose: PurposeApprovals, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		return nil, err
	}
	return &socketClient{cl: wire.NewClient(ch)}, nil
}

// Approvals socket protocol: roles and purpose.
const (
	RoleApprovals       = "operator-approvals"
	RoleApprovalsClient = "operator-approver"
	PurposeApprovals    = "approvals"
)
