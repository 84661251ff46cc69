package msg

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/stewardrt/steward/wire"
)

// Versions of the custody messages. The first versions carried no "v"
// field; a message without one is version 1 (CustodyV1) and reads with
// the fields it has, so receipts that hold a version 1 consent still
// verify. A peer that predates version 2 refuses a version 2 message as
// having unknown fields (the decoding is strict), and a version 2
// controller refuses a version 1 reserve: it carries no grant to check the
// charge against. Either way nothing is consented to or charged.
const (
	CustodyV1 = 0 // no "v" field: the first format
	CustodyV2 = 2
)

// Reserve asks the controller, over the reverse channel, to consent to pay
// for Attempt: Charge for an answer and RefusalPrice for a refusal. The
// controller consents only to a request hash it journaled in `begin` and
// has not consented to before, only to the price of the grant the host
// admitted the call under (Grant, the operator-signed bytes), and only
// within its own payer policy.
type Reserve struct {
	V             int    `cbor:"v,omitempty"` // CustodyV2; absent in version 1
	Attempt       string `cbor:"attempt"`
	Controller    string `cbor:"controller"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Charge        uint64 `cbor:"charge"` // the answer price: the grant's price, or its discovery price
	// RefusalPrice is what an application's refusal may be charged: 0 until
	// a grant can set a price for refusals (DESIGN.md section 5).
	RefusalPrice uint64 `cbor:"refusalPrice,omitempty"`
	// Grant is the signed grant (msg.SignGrant) the host admitted the call
	// under; version 2 only.
	Grant []byte `cbor:"grant,omitempty"`
}

// Consent is what the controller's dispatch key signs: the payer's agreement
// to pay for one attempt at most Charge for an answer or RefusalPrice for a
// refusal (a receipt charges one of them, or 0). It travels as a COSE_Sign1
// (ConsentReply) and the host puts those bytes in the attempt's receipt.
type Consent struct {
	V          int    `cbor:"v,omitempty"` // CustodyV2; absent in version 1
	Attempt    string `cbor:"attempt"`
	Controller string `cbor:"controller"`
	// Principal is who made the call, as the controller knows it from the
	// kernel: "uid:N" (the peer of the MCP session) or "foreground".
	Principal     string `cbor:"principal,omitempty"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	// GrantSHA256 is SHA-256 of the signed grant the charge was checked
	// against (Reserve.Grant).
	GrantSHA256  []byte `cbor:"grantSha256,omitempty"`
	Charge       uint64 `cbor:"charge"` // the answer price (the one price of version 1)
	RefusalPrice uint64 `cbor:"refusalPrice,omitempty"`
	At           int64  `cbor:"at"` // unix ms, the controller's clock
}

// ConsentReply carries the signed Consent.
type ConsentReply struct {
	Consent []byte `cbor:"consent"`
}

// GrantHash is SHA-256 of a signed grant: how a consent names it.
func GrantHash(signed []byte) []byte {
	h := sha256.Sum256(signed)
	return h[:]
}

// Allows reports whether a receipt's charge is one a consent allows: its
// answer price, its refusal price, or nothing.
func (c *Consent) Allows(charge uint64) bool {
	return charge == 0 || charge == c.Charge || charge == c.RefusalPrice
}

// SignConsent signs c with the controller's dispatch key.
func SignConsent(k *wire.SigningKey, c Consent) ([]byte, error) {
	b, err := wire.Marshal(c)
	if err != nil {
		return nil, err
	}
	return wire.Sign1(k, b)
}

// OpenConsent checks a signed consent's signature against the controller's
// dispatch key and decodes it, of either version.
func OpenConsent(signed []byte, dispatch *wire.Keyring) (Consent, error) {
	payload, _, err := wire.Verify1(signed, dispatch)
	if err != nil {
		return Consent{}, fmt.Errorf("payer consent: %w", err)
	}
	var c Consent
	if err := wire.Unmarshal(payload, &c); err != nil {
		return Consent{}, fmt.Errorf("payer consent: %w", err)
	}
	if c.V != CustodyV1 && c.V != CustodyV2 {
		return Consent{}, fmt.Errorf("payer consent: %w: version %d is not one this build reads", ErrMismatch, c.V)
	}
	return c, nil
}

// VerifyConsent checks a signed consent against the controller's pinned
// dispatch key and that it consents to exactly what r asked: the same
// attempt, controller, application, operation, request hash and prices,
// and, when r carries a grant (version 2), that grant's hash in a version 2
// consent.
func VerifyConsent(signed []byte, dispatch *wire.Keyring, r Reserve) (Consent, error) {
	c, err := OpenConsent(signed, dispatch)
	if err != nil {
		return Consent{}, err
	}
	if c.Attempt != r.Attempt || c.Controller != r.Controller ||
		c.Application != r.Application || c.Operation != r.Operation ||
		string(c.RequestSHA256) != string(r.RequestSHA256) || c.Charge != r.Charge ||
		c.RefusalPrice != r.RefusalPrice {
		return Consent{}, fmt.Errorf("payer consent: %w: it does not match the reservation asked for", ErrMismatch)
	}
	if r.Grant != nil && (c.V != CustodyV2 || !bytes.Equal(c.GrantSHA256, GrantHash(r.Grant))) {
		return Consent{}, fmt.Errorf("payer consent: %w: it does not name the grant the reservation cites", ErrMismatch)
	}
	return c, nil
}
