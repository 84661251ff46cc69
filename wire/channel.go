package wire

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ChannelConfig is one side's part of a channel.
type ChannelConfig struct {
	Key       *SigningKey // this side's signing key
	Role      string      // this side's role, e.g. "host", "controller-tool", "controller-dispatch"
	PeerKeys  *Keyring    // keys pinned for the peer on this socket
	PeerRole  string      // the role the peer must announce ("" = any)
	Path      string      // the socket path, bound into the channel id; both sides must use the same string
	Purpose   string      // e.g. "dispatch", "custody"; the listener refuses a hello for another purpose
	SendLimit int         // MaxRequestFrame or MaxReplyFrame
	RecvLimit int         // MaxRequestFrame or MaxReplyFrame

	// HandshakeTimeout bounds the whole handshake (0: DefaultHandshakeTimeout),
	// so that a silent peer cannot hold a connection slot forever.
	HandshakeTimeout time.Duration
}

// DefaultHandshakeTimeout bounds a handshake when ChannelConfig.HandshakeTimeout is 0.
const DefaultHandshakeTimeout = 10 * time.Second

// readBufferSize is the channel's read buffer; frames larger than it are
// read straight into their own allocation.
const readBufferSize = 16384

// Channel is one authenticated, ordered, signed duplex channel on a
// connection. Send is safe for concurrent use; Recv must be called from one
// goroutine at a time. The first failure of Recv closes the connection and
// every later Recv returns that same error.
type Channel struct {
	conn      net.Conn
	br        *bufio.Reader
	key       *SigningKey
	peer      *PublicKey
	id        []byte
	sendLimit int
	recvLimit int

	sendMu  sync.Mutex
	sendSeq uint64 // last sequence number sent

	recvMu  sync.Mutex
	recvSeq uint64 // last sequence number received
	recvErr error

	recvFailed atomic.Pointer[error] // recvErr, readable without recvMu

	closeOnce sync.Once
	closeErr  error
}

// channelLabel separates this hash from every other SHA-256 in the system.
const channelLabel = "steward wire channel v1"

// channelID computes SHA-256 over six length-prefixed fields (each a 4-byte
// big-endian length, then the bytes): the label "steward wire channel v1",
// the dialler's nonce, the listener's nonce, the dialler's role, the
// listener's role, and the socket path.
func channelID(diallerNonce, listenerNonce []byte, diallerRole, listenerRole, path string) []byte {
	h := sha256.New()
	var n [4]byte
	for _, f := range [][]byte{[]byte(channelLabel), diallerNonce, listenerNonce, []byte(diallerRole), []byte(listenerRole), []byte(path)} {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	return h.Sum(nil)
}

// ID returns the channel id. The caller must not modify it.
func (c *Channel) ID() []byte { return c.id }

// Peer returns the key that signed the peer's side of the handshake; every
// frame received on the channel is verified against it alone.
func (c *Channel) Peer() *PublicKey { return c.peer }

// Conn returns the underlying connection, e.g. to read its PeerConn credentials.
func (c *Channel) Conn() net.Conn { return c.conn }

// Close closes the connection. It is safe to call more than once.
func (c *Channel) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

// recvFailure returns the error that ended Recv, or nil.
func (c *Channel) recvFailure() error {
	if p := c.recvFailed.Load(); p != nil {
		return *p
	}
	return nil
}

// Send encodes body, wraps it in an envelope with the channel id and the next
// sequence number, signs it and writes it as one frame. A frame past
// SendLimit is refused before anything is written and does not use up a
// sequence number, so the channel stays usable; a failed write closes it.
func (c *Channel) Send(t, id string, body any) error {
	b, err := Marshal(body)
	if err != nil {
		return fmt.Errorf("wire: send %q: body: %w", t, err)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	e := Envelope{V: Version, T: t, Ch: c.id, Seq: c.sendSeq + 1, ID: id, At: time.Now().UnixMilli(), Body: b}
	msg, err := signEnvelope(c.key, &e)
	if err != nil {
		return fmt.Errorf("wire: send %q: %w", t, err)
	}
	if err := WriteFrame(c.conn, msg, c.sendLimit); err != nil {
		var tooLarge *FrameTooLargeError
		if !errors.As(err, &tooLarge) {
			c.Close()
		}
		return fmt.Errorf("wire: send %q id %q: %w", t, id, err)
	}
	c.sendSeq++
	return nil
}

// Recv reads, verifies and decodes the next frame. It verifies the signature
// against the key that signed the peer's handshake frame, then requires
// version 1, this channel's id and the next sequence number. Any failure
// closes the connection and returns an error wrapping ErrFrameTooLarge,
// ErrMalformed, ErrUnknownKID, ErrBadSignature, ErrCrossChannel, ErrReplay or
// ErrReorder (or the read error, io.EOF when the peer closed cleanly).
func (c *Channel) Recv() (*Envelope, error) {
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	if c.recvErr != nil {
		return nil, c.recvErr
	}
	e, err := c.recv()
	if err != nil {
		c.recvErr = err
		c.recvFailed.Store(&err) // before Close, so a Send that fails on the closed conn can tell why
		c.Close()
		return nil, err
	}
	c.recvSeq = e.Seq
	return e, nil
}

func (c *Channel) recv() (*Envelope, error) {
	msg, err := ReadFrame(c.br, c.recvLimit)
	if err != nil {
		return nil, err
	}
	p, err := parseSign1(msg)
	if err != nil {
		return nil, fmt.Errorf("wire: recv: %w", err)
	}
	if p.kid != c.peer.kid {
		return nil, fmt.Errorf("%w: recv: frame signed by kid %s, but this channel's peer is kid %s", ErrUnknownKID, p.kid, c.peer.kid)
	}
	if err := verify1With(p, c.peer); err != nil {
		return nil, fmt.Errorf("wire: recv: %w", err)
	}
	e, err := decodeEnvelope(p.payload)
	if err != nil {
		return nil, fmt.Errorf("wire: recv: %w", err)
	}
	if !bytes.Equal(e.Ch, c.id) {
		return nil, fmt.Errorf("%w: recv: %q frame seq %d carries channel %x, this channel is %x", ErrCrossChannel, e.T, e.Seq, e.Ch, c.id)
	}
	switch want := c.recvSeq + 1; {
	case e.Seq < want:
		return nil, fmt.Errorf("%w: recv: %q frame seq %d, already received up to %d", ErrReplay, e.T, e.Seq, c.recvSeq)
	case e.Seq > want:
		return nil, fmt.Errorf("%w: recv: %q frame seq %d, want %d", ErrReorder, e.T, e.Seq, want)
	}
	return e, nil
}
