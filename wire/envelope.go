package wire

import "fmt"

// Version is the only envelope version this package speaks.
const Version = 1

// Frame types of the channel layer itself. Every other type belongs to the
// protocol spoken on the channel.
const (
	TypeHello   = "hello"    // dialler -> listener: hello{nonce, role, purpose}
	TypeHelloOK = "hello-ok" // listener -> dialler: hello-ok{nonce, role}
	TypeRefused = "refused"  // listener -> dialler, instead of hello-ok: refused{reason}
)

// Envelope is the signed payload of every frame: core-deterministic CBOR of
// {v, t, ch, seq, id, at, body}.
type Envelope struct {
	V    int        `cbor:"v"`    // Version
	T    string     `cbor:"t"`    // frame type
	Ch   []byte     `cbor:"ch"`   // channel id; empty on hello, hello-ok and refused
	Seq  uint64     `cbor:"seq"`  // per-direction sequence, 0 on hello, hello-ok and refused
	ID   string     `cbor:"id"`   // correlation id: a reply carries its request's id
	At   int64      `cbor:"at"`   // sender's clock, unix milliseconds; informational only
	Body RawMessage `cbor:"body"` // the body, decoded by the receiver per T
}

// Decode decodes the body into v strictly (see Unmarshal).
func (e *Envelope) Decode(v any) error {
	if err := Unmarshal(e.Body, v); err != nil {
		return fmt.Errorf("wire: %q frame body: %w", e.T, err)
	}
	return nil
}

// decodeEnvelope decodes a verified payload and checks the fields every
// frame must have: the version and a type.
func decodeEnvelope(payload []byte) (*Envelope, error) {
	e := new(Envelope)
	if err := Unmarshal(payload, e); err != nil {
		return nil, fmt.Errorf("wire: envelope: %w", err)
	}
	if e.V != Version {
		return nil, fmt.Errorf("%w: envelope version %d, want %d", ErrMalformed, e.V, Version)
	}
	if e.T == "" {
		return nil, fmt.Errorf("%w: envelope without a type", ErrMalformed)
	}
	if len(e.Body) == 0 {
		return nil, fmt.Errorf("%w: %q envelope without a body", ErrMalformed, e.T)
	}
	return e, nil
}

// hello is the dialler's first frame.
type hello struct {
	Nonce   []byte `cbor:"nonce"`
	Role    string `cbor:"role"`
	Purpose string `cbor:"purpose"`
}

// helloOK is the listener's answer. It names the listener's role, which
// the channel id binds, so that a dialler that accepts any role still
// computes the same id.
type helloOK struct {
	Nonce []byte `cbor:"nonce"`
	Role  string `cbor:"role"`
}

// Refusal is the body of a refused frame.
type Refusal struct {
	Reason string `cbor:"reason"`
}

// signEnvelope encodes and signs one envelope.
func signEnvelope(k *SigningKey, e *Envelope) ([]byte, error) {
	payload, err := Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("wire: encode %q envelope: %w", e.T, err)
	}
	return Sign1(k, payload)
}
