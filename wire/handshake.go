package wire

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"time"
)

// nonceSize is the size of each side's handshake nonce.
const nonceSize = 32

func (cfg *ChannelConfig) check() error {
	switch {
	case cfg.Key == nil:
		return errors.New("wire: channel config without a signing key")
	case cfg.PeerKeys.Len() == 0:
		return errors.New("wire: channel config pins no peer keys")
	case cfg.Role == "":
		return errors.New("wire: channel config without a role")
	case cfg.SendLimit <= 0 || cfg.RecvLimit <= 0:
		return fmt.Errorf("wire: channel config send limit %d, receive limit %d: both must be positive", cfg.SendLimit, cfg.RecvLimit)
	}
	return nil
}

func (cfg *ChannelConfig) deadline() time.Time {
	d := cfg.HandshakeTimeout
	if d <= 0 {
		d = DefaultHandshakeTimeout
	}
	return time.Now().Add(d)
}

func newNonce() ([]byte, error) {
	n := make([]byte, nonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("wire: handshake nonce: %w", err)
	}
	return n, nil
}

// handshakeFrame signs an unsequenced frame (hello, hello-ok, refused).
func handshakeFrame(k *SigningKey, t string, body any) ([]byte, error) {
	b, err := Marshal(body)
	if err != nil {
		return nil, err
	}
	return signEnvelope(k, &Envelope{V: Version, T: t, At: time.Now().UnixMilli(), Body: b})
}

// readHandshakeFrame reads one unsequenced frame signed by a pinned key.
func readHandshakeFrame(br *bufio.Reader, cfg *ChannelConfig) (*Envelope, *PublicKey, error) {
	msg, err := ReadFrame(br, cfg.RecvLimit)
	if err != nil {
		return nil, nil, err
	}
	payload, signer, err := Verify1(msg, cfg.PeerKeys)
	if err != nil {
		return nil, nil, err
	}
	e, err := decodeEnvelope(payload)
	if err != nil {
		return nil, nil, err
	}
	if len(e.Ch) != 0 || e.Seq != 0 {
		return nil, nil, fmt.Errorf("%w: %q handshake frame with channel %x seq %d, want an empty channel and seq 0", ErrMalformed, e.T, e.Ch, e.Seq)
	}
	return e, signer, nil
}

// ClientHandshake runs the dialler's side: it sends hello{nonce, role,
// purpose} and expects hello-ok{nonce, role} signed by a key pinned in
// PeerKeys. A signed refused{reason} instead returns an error wrapping
// ErrRefused with the reason. On any failure the connection is closed.
func ClientHandshake(conn net.Conn, cfg ChannelConfig) (*Channel, error) {
	c, err := clientHandshake(conn, &cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("wire: client handshake on %s as %q: %w", cfg.Path, cfg.Role, err)
	}
	return c, nil
}

func clientHandshake(conn net.Conn, cfg *ChannelConfig) (*Channel, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(cfg.deadline()); err != nil {
		return nil, err
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, err
	}
	msg, err := handshakeFrame(cfg.Key, TypeHello, hello{Nonce: nonce, Role: cfg.Role, Purpose: cfg.Purpose})
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, readBufferSize)
	if werr := WriteFrame(conn, msg, cfg.SendLimit); werr != nil {
		// A listener that refuses on accept may have written its refusal
		// and closed before our hello arrived: read it rather than report
		// a bare broken pipe.
		if e, _, rerr := readHandshakeFrame(br, cfg); rerr == nil && e.T == TypeRefused {
			return nil, refusedError(e)
		}
		return nil, werr
	}
	e, signer, err := readHandshakeFrame(br, cfg)
	if err != nil {
		return nil, err
	}
	switch e.T {
	case TypeRefused:
		return nil, refusedError(e)
	case TypeHelloOK:
	default:
		return nil, fmt.Errorf("%w: got a %q frame, want %q", ErrMalformed, e.T, TypeHelloOK)
	}
	var ok helloOK
	if err := e.Decode(&ok); err != nil {
		return nil, err
	}
	if len(ok.Nonce) != nonceSize {
		return nil, fmt.Errorf("%w: hello-ok nonce of %d bytes, want %d", ErrMalformed, len(ok.Nonce), nonceSize)
	}
	if cfg.PeerRole != "" && ok.Role != cfg.PeerRole {
		return nil, fmt.Errorf("%w: listener announced role %q, want %q", ErrWrongPeer, ok.Role, cfg.PeerRole)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return newChannel(conn, br, cfg, signer, channelID(nonce, ok.Nonce, cfg.Role, ok.Role, cfg.Path)), nil
}

func refusedError(e *Envelope) error {
	var r Refusal
	if err := e.Decode(&r); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrRefused, r.Reason)
}

// ServerHandshake runs the listener's side: it expects a hello signed by a
// key pinned in PeerKeys, for PeerRole (if set) and Purpose (if set), and
// answers hello-ok{nonce, role}. A hello it cannot accept is answered with a
// signed refused{reason} frame before the connection is closed.
func ServerHandshake(conn net.Conn, cfg ChannelConfig) (*Channel, error) {
	c, err := serverHandshake(conn, &cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("wire: server handshake on %s as %q: %w", cfg.Path, cfg.Role, err)
	}
	return c, nil
}

func serverHandshake(conn net.Conn, cfg *ChannelConfig) (*Channel, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(cfg.deadline()); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, readBufferSize)
	e, signer, err := readHandshakeFrame(br, cfg)
	var h hello
	if err == nil {
		h, err = acceptHello(e, cfg)
	}
	if err != nil {
		writeRefusal(conn, cfg.Key, err)
		return nil, err
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, err
	}
	msg, err := handshakeFrame(cfg.Key, TypeHelloOK, helloOK{Nonce: nonce, Role: cfg.Role})
	if err != nil {
		return nil, err
	}
	if err := WriteFrame(conn, msg, cfg.SendLimit); err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return newChannel(conn, br, cfg, signer, channelID(h.Nonce, nonce, h.Role, cfg.Role, cfg.Path)), nil
}

// acceptHello checks a hello's type, nonce, role and purpose.
func acceptHello(e *Envelope, cfg *ChannelConfig) (hello, error) {
	var h hello
	if e.T != TypeHello {
		return h, fmt.Errorf("%w: got a %q frame, want %q", ErrMalformed, e.T, TypeHello)
	}
	if err := e.Decode(&h); err != nil {
		return h, err
	}
	if len(h.Nonce) != nonceSize {
		return h, fmt.Errorf("%w: hello nonce of %d bytes, want %d", ErrMalformed, len(h.Nonce), nonceSize)
	}
	if h.Role == "" {
		return h, fmt.Errorf("%w: hello without a role", ErrMalformed)
	}
	if cfg.PeerRole != "" && h.Role != cfg.PeerRole {
		return h, fmt.Errorf("%w: dialler announced role %q, this socket admits %q", ErrWrongPeer, h.Role, cfg.PeerRole)
	}
	if cfg.Purpose != "" && h.Purpose != cfg.Purpose {
		return h, fmt.Errorf("%w: dialler asked for purpose %q, this socket serves %q", ErrWrongPeer, h.Purpose, cfg.Purpose)
	}
	return h, nil
}

// writeRefusal sends a signed refused{reason} frame, best effort: the
// connection is closed right after, and the caller reports err itself.
func writeRefusal(conn net.Conn, key *SigningKey, reason error) error {
	msg, err := handshakeFrame(key, TypeRefused, Refusal{Reason: reason.Error()})
	if err != nil {
		return err
	}
	return WriteFrame(conn, msg, MaxReplyFrame)
}

func newChannel(conn net.Conn, br *bufio.Reader, cfg *ChannelConfig, peer *PublicKey, id []byte) *Channel {
	return &Channel{conn: conn, br: br, key: cfg.Key, peer: peer, id: id, sendLimit: cfg.SendLimit, recvLimit: cfg.RecvLimit}
}
