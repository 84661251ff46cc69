package wire

import (
	"crypto/ed25519"
	"fmt"

	"github.com/stewardrt/steward/internal/cborhead"
)

// sign1Context and signContext are the first element of Sig_structure
// (RFC 9052 section 4.4) for COSE_Sign1 and COSE_Sign.
const (
	sign1Context = "Signature1"
	signContext  = "Signature"
)

// Sign1 signs payload as a tagged COSE_Sign1 (RFC 9052, tag 18):
// protected {1: -8 (EdDSA), 4: kid}, empty unprotected map, the payload
// attached, external_aad empty.
func Sign1(k *SigningKey, payload []byte) ([]byte, error) {
	tbs := sign1ToBeSigned(k.protected, payload)
	sig := ed25519.Sign(k.priv, tbs)
	msg := make([]byte, 0, 2+cborhead.Len(uint64(len(k.protected)))+len(k.protected)+1+
		cborhead.Len(uint64(len(payload)))+len(payload)+2+len(sig))
	msg = cborhead.Append(msg, majorTag, coseTagSign1)
	msg = cborhead.Append(msg, majorArray, 4)
	msg = appendBytes(msg, k.protected)
	msg = cborhead.Append(msg, majorMap, 0)
	msg = appendBytes(msg, payload)
	msg = appendBytes(msg, sig)
	return msg, nil
}

// sign1ToBeSigned encodes ["Signature1", protected, empty external_aad, payload].
func sign1ToBeSigned(protected, payload []byte) []byte {
	b := make([]byte, 0, 1+1+len(sign1Context)+cborhead.Len(uint64(len(protected)))+len(protected)+1+
		cborhead.Len(uint64(len(payload)))+len(payload))
	b = cborhead.Append(b, majorArray, 4)
	b = appendText(b, sign1Context)
	b = appendBytes(b, protected)
	b = appendBytes(b, nil)
	return appendBytes(b, payload)
}

// coseProtected is the only protected header this package accepts: alg and
// kid, nothing else (no crit, no content type).
type coseProtected struct {
	Alg int    `cbor:"1,keyasint"`
	KID []byte `cbor:"4,keyasint"`
}

// parseProtected decodes a protected header and requires alg and a 16-byte kid.
func parseProtected(b []byte, alg int) (KID, error) {
	var h coseProtected
	if err := Unmarshal(b, &h); err != nil {
		return KID{}, fmt.Errorf("%w: protected header: %w", ErrMalformed, err)
	}
	if h.Alg != alg {
		return KID{}, fmt.Errorf("%w: protected header alg %d, want %d", ErrMalformed, h.Alg, alg)
	}
	if len(h.KID) != len(KID{}) {
		return KID{}, fmt.Errorf("%w: protected header kid of %d bytes, want %d", ErrMalformed, len(h.KID), len(KID{}))
	}
	return KID(h.KID), nil
}

// sign1Parts are the pieces of a parsed COSE_Sign1, as subslices of the message.
type sign1Parts struct {
	protected, payload, signature []byte
	kid                           KID
}

// parseSign1 parses a tagged COSE_Sign1 of this package's profile.
func parseSign1(msg []byte) (sign1Parts, error) {
	var p sign1Parts
	r := cborReader{b: msg}
	if err := r.expect(majorTag, coseTagSign1, "COSE_Sign1 tag"); err != nil {
		return p, err
	}
	if err := r.expect(majorArray, 4, "COSE_Sign1 array"); err != nil {
		return p, err
	}
	var err error
	if p.protected, err = r.bytes("COSE_Sign1 protected"); err != nil {
		return p, err
	}
	if err := r.expect(majorMap, 0, "COSE_Sign1 unprotected (must be empty)"); err != nil {
		return p, err
	}
	if p.payload, err = r.bytes("COSE_Sign1 payload"); err != nil {
		return p, err
	}
	if p.signature, err = r.bytes("COSE_Sign1 signature"); err != nil {
		return p, err
	}
	if err := r.end(); err != nil {
		return p, err
	}
	if len(p.signature) != ed25519SigLen {
		return p, fmt.Errorf("%w: COSE_Sign1 signature of %d bytes, want %d", ErrMalformed, len(p.signature), ed25519SigLen)
	}
	p.kid, err = parseProtected(p.protected, coseAlgEdDSA)
	return p, err
}

// Verify1 verifies a COSE_Sign1 against the keys pinned in keys and returns
// its payload (a subslice of msg) and the key that signed it. A kid not in
// keys wraps ErrUnknownKID; a signature that does not verify wraps
// ErrBadSignature; anything outside this package's COSE profile wraps
// ErrMalformed.
func Verify1(msg []byte, keys *Keyring) (payload []byte, signer *PublicKey, err error) {
	p, err := parseSign1(msg)
	if err != nil {
		return nil, nil, err
	}
	key, ok := keys.Lookup(p.kid)
	if !ok {
		return nil, nil, fmt.Errorf("%w: kid %s is not pinned for this socket", ErrUnknownKID, p.kid)
	}
	if err := verify1With(p, key); err != nil {
		return nil, nil, err
	}
	return p.payload, key, nil
}

// verify1With checks a parsed Sign1's signature under key.
func verify1With(p sign1Parts, key *PublicKey) error {
	if !ed25519.Verify(key.key, sign1ToBeSigned(p.protected, p.payload), p.signature) {
		return fmt.Errorf("%w: COSE_Sign1 signature does not verify under kid %s", ErrBadSignature, key.kid)
	}
	return nil
}
