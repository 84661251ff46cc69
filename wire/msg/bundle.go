package msg

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/wire"
)

// Bundle is everything a controller needs to trust its host, and nothing
// secret: the host's public keys, the host's account, and the signed route
// records selected for this controller.
type Bundle struct {
	Controller string   `cbor:"controller"`
	HostKey    []byte   `cbor:"hostKey"` // wire.HybridPublicKey COSE_KeySet
	HostUID    uint32   `cbor:"hostUid"`
	Routes     [][]byte `cbor:"routes"` // signed RouteRecords, as selected when it was built; the live table is the control channel's
	IssuedAt   int64    `cbor:"issuedAt"`
	// Control is the host's control socket for this controller (control.go):
	// where the controller asks for its live routes, inspects attempts and
	// asks an agent's allowance. Omitted in bundles built before it.
	Control string `cbor:"control,omitempty"`
}

// SignBundle signs b with the operator's hybrid key.
func SignBundle(k *wire.HybridSigningKey, b Bundle) ([]byte, error) { return signHybrid(k, b) }

// OpenBundle parses a signed bundle, verifying it with the host key it
// carries, and every route record in it with the same key. Whoever installs
// the bundle decides to trust that key; OpenBundle proves the bundle is
// whole and self-consistent.
func OpenBundle(signed []byte) (Bundle, *wire.HybridPublicKey, []RouteRecord, error) {
	var b Bundle
	// The key is inside the payload: read it unverified, then verify with it.
	payload, err := unverifiedSignPayload(signed)
	if err != nil {
		return Bundle{}, nil, nil, fmt.Errorf("bundle: %w", err)
	}
	if err := wire.Unmarshal(payload, &b); err != nil {
		return Bundle{}, nil, nil, fmt.Errorf("bundle: %w", err)
	}
	pub, err := wire.ParseHybridPublicKey(b.HostKey)
	if err != nil {
		return Bundle{}, nil, nil, err
	}
	var checked Bundle
	if err := verifyHybrid(signed, pub, &checked, "bundle"); err != nil {
		return Bundle{}, nil, nil, err
	}
	routes := make([]RouteRecord, 0, len(checked.Routes))
	for _, s := range checked.Routes {
		r, err := VerifyRoute(s, pub)
		if err != nil {
			return Bundle{}, nil, nil, err
		}
		routes = append(routes, r)
	}
	return checked, pub, routes, nil
}

// ControllerKeys is the public half of a controller's four role keys, as
// `steward-controller keys init` writes it for `steward-operator controller add`.
type ControllerKeys struct {
	Controller []byte `cbor:"controller"` // COSE_Key of each role
	Tool       []byte `cbor:"tool"`
	Dispatch   []byte `cbor:"dispatch"`
	Provider   []byte `cbor:"provider"`
}

// coseSign is the outer shape of a COSE_Sign message (RFC 9052, tag 98).
type coseSign struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected cbor.RawMessage
	Payload     []byte
	Signatures  cbor.RawMessage
}

// unverifiedSignPayload returns the payload of a COSE_Sign message without
// checking its signatures. Only for an artifact that carries its own key,
// which the caller then verifies the whole message with.
func unverifiedSignPayload(signed []byte) ([]byte, error) {
	var tag cbor.RawTag
	if err := wire.Unmarshal(signed, &tag); err != nil {
		return nil, err
	}
	if tag.Number != 98 {
		return nil, errors.New("not a COSE_Sign message (tag 98)")
	}
	var m coseSign
	if err := wire.Unmarshal(tag.Content, &m); err != nil {
		return nil, err
	}
	return m.Payload, nil
}
