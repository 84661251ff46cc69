package wire

import "errors"

// Sentinel errors. Every error this package returns for one of these
// conditions wraps the sentinel with %w and says, in one line, what was
// refused and why.
var (
	// ErrMalformed: bytes that are not the exact shape this package expects
	// (bad CBOR, wrong COSE structure, unknown field, wrong type, bad version).
	ErrMalformed = errors.New("wire: malformed")
	// ErrBadSignature: a signature that does not verify under the named key.
	ErrBadSignature = errors.New("wire: bad signature")
	// ErrUnknownKID: a kid that names no key pinned for this socket and role,
	// or not the key that opened the channel.
	ErrUnknownKID = errors.New("wire: unknown kid")
	// ErrRefused: the peer answered with a signed refused{reason} frame.
	ErrRefused = errors.New("wire: refused by peer")
	// ErrWrongPeer: SO_PEERCRED names a UID the socket does not admit, or the
	// peer announced a role or purpose other than the one required.
	ErrWrongPeer = errors.New("wire: wrong peer")
	// ErrUnsafePath: a socket path or one of its ancestors fails the ownership
	// and mode checks.
	ErrUnsafePath = errors.New("wire: unsafe socket path")
	// ErrUnsafeFile: a private file (OpenPrivateFile) or one of its
	// ancestors fails the ownership, type or mode checks; the error is an
	// *UnsafeFileError.
	ErrUnsafeFile = errors.New("wire: unsafe private file")
	// ErrUnsafeKeyFile: a key file or its directory fails the ownership, type
	// or mode checks.
	ErrUnsafeKeyFile = errors.New("wire: unsafe key file")
	// ErrTooManyConns: a connection past MaxConns or MaxPerUID.
	ErrTooManyConns = errors.New("wire: too many connections")
	// ErrReplay: a frame whose sequence number is not above the last one received.
	ErrReplay = errors.New("wire: replayed frame")
	// ErrReorder: a frame whose sequence number skips ahead.
	ErrReorder = errors.New("wire: reordered frame")
	// ErrCrossChannel: a frame bound to another channel.
	ErrCrossChannel = errors.New("wire: frame from another channel")
	// ErrClosed: the channel or client was closed by this side.
	ErrClosed = errors.New("wire: channel closed")
)
