package msg

import (
	"fmt"

	"github.com/stewardrt/steward/wire"
)

// Reserve asks the controller, over the reverse channel, to consent to pay
// Charge for Attempt. The controller consents only to a request hash it
// journaled in `begin` and has not consented to before.
type Reserve struct {
	Attempt       string `cbor:"attempt"`
	Controller    string `cbor:"controller"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Charge        uint64 `cbor:"charge"`
}

// Consent is what the controller's dispatch key signs: the payer's agreement
// to one charge for one attempt. It travels as a COSE_Sign1 (ConsentReply).
type Consent struct {
	Attempt       string `cbor:"attempt"`
	Controller    string `cbor:"controller"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Charge        uint64 `cbor:"charge"`
	At            int64  `cbor:"at"`
}

// ConsentReply carries the signed Consent.
type ConsentReply struct {
	Consent []byte `cbor:"consent"`
}

// SignConsent signs c with the controller's dispatch key.
func SignConsent(k *wire.SigningKey, c Consent) ([]byte, error) {
	b, err := wire.Marshal(c)
	if err != nil {
		return nil, err
	}
	return wire.Sign1(k, b)
}

// VerifyConsent checks a signed consent against the controller's pinned
// dispatch key and that it consents to exactly what r asked.
func VerifyConsent(signed []byte, dispatch *wire.Keyring, r Reserve) (Consent, error) {
	payload, _, err := wire.Verify1(signed, dispatch)
	if err != nil {
		return Consent{}, fmt.Errorf("payer consent: %w", err)
	}
	var c Consent
	if err := wire.Unmarshal(payload, &c); err != nil {
		return Consent{}, fmt.Errorf("payer consent: %w", err)
	}
	if c.Attempt != r.Attempt || c.Controller != r.Controller ||
		c.Application != r.Application || c.Operation != r.Operation ||
		string(c.RequestSHA256) != string(r.RequestSHA256) || c.Charge != r.Charge {
		return Consent{}, fmt.Errorf("payer consent: %w: it does not match the reservation asked for", ErrMismatch)
	}
	return c, nil
}
