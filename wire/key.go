package wire

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"

	"github.com/stewardrt/steward/internal/cborhead"
)

// COSE labels and values used by this package (RFC 9052, RFC 9053,
// draft-ietf-cose-dilithium).
const (
	coseKty       = 1
	coseKtyOKP    = 1
	coseKtyAKP    = 7
	coseCrvEd     = 6
	coseAlgEdDSA  = -8
	coseAlgMLDSA  = -49 // ML-DSA-65
	coseHdrAlg    = 1
	coseHdrKID    = 4
	coseTagSign1  = 18
	coseTagSign   = 98
	ed25519SigLen = ed25519.SignatureSize
)

// KID identifies a public key: the first 16 bytes of SHA-256 of the key's
// public COSE_Key encoding. It is the kid of every COSE signature it makes.
type KID [16]byte

// String returns the kid in lower-case hex.
func (k KID) String() string { return hex.EncodeToString(k[:]) }

func kidOf(coseKey []byte) KID {
	sum := sha256.Sum256(coseKey)
	var k KID
	copy(k[:], sum[:16])
	return k
}

// okpPublicKey is the COSE_Key of an Ed25519 public key: {1: 1, -1: 6, -2: x}.
type okpPublicKey struct {
	Kty int    `cbor:"1,keyasint"`
	Crv int    `cbor:"-1,keyasint"`
	X   []byte `cbor:"-2,keyasint"`
}

// okpPrivateKey adds d (the 32-byte Ed25519 seed) to okpPublicKey.
type okpPrivateKey struct {
	Kty int    `cbor:"1,keyasint"`
	Crv int    `cbor:"-1,keyasint"`
	X   []byte `cbor:"-2,keyasint"`
	D   []byte `cbor:"-4,keyasint"`
}

// PublicKey is an Ed25519 public key with its COSE_Key encoding and KID.
type PublicKey struct {
	key  ed25519.PublicKey
	cose []byte
	kid  KID
}

func newPublicKey(pub ed25519.PublicKey) *PublicKey {
	cose, err := Marshal(okpPublicKey{Kty: coseKtyOKP, Crv: coseCrvEd, X: pub})
	if err != nil {
		panic(err) // a fixed shape that always encodes
	}
	return &PublicKey{key: pub, cose: cose, kid: kidOf(cose)}
}

// KID returns the key's identifier.
func (p *PublicKey) KID() KID { return p.kid }

// MarshalCOSEKey returns the key's COSE_Key: {1: 1 (OKP), -1: 6 (Ed25519),
// -2: x}, deterministic CBOR. The caller must not modify the result.
func (p *PublicKey) MarshalCOSEKey() []byte { return p.cose }

// Ed25519 returns the raw public key. The caller must not modify it.
func (p *PublicKey) Ed25519() ed25519.PublicKey { return p.key }

// Equal reports whether p and q are the same key.
func (p *PublicKey) Equal(q *PublicKey) bool {
	return p != nil && q != nil && subtle.ConstantTimeCompare(p.key, q.key) == 1
}

// ParsePublicKey parses an Ed25519 public COSE_Key as MarshalCOSEKey writes
// it. Any other label (a private d, an alg, key_ops) is refused.
func ParsePublicKey(coseKey []byte) (*PublicKey, error) {
	var k okpPublicKey
	if err := Unmarshal(coseKey, &k); err != nil {
		return nil, fmt.Errorf("wire: parse public key: %w", err)
	}
	if err := checkOKP(k.Kty, k.Crv, k.X); err != nil {
		return nil, err
	}
	return newPublicKey(ed25519.PublicKey(k.X)), nil
}

func checkOKP(kty, crv int, x []byte) error {
	if kty != coseKtyOKP || crv != coseCrvEd {
		return fmt.Errorf("%w: COSE_Key is kty %d crv %d, want OKP (1) Ed25519 (6)", ErrMalformed, kty, crv)
	}
	if len(x) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: Ed25519 x is %d bytes, want %d", ErrMalformed, len(x), ed25519.PublicKeySize)
	}
	return nil
}

// SigningKey is an Ed25519 private key, used for every per-call signature.
type SigningKey struct {
	priv      ed25519.PrivateKey
	pub       *PublicKey
	protected []byte // the Sign1 protected header {1: -8, 4: kid}, built once
}

func newSigningKey(seed []byte) *SigningKey {
	priv := ed25519.NewKeyFromSeed(seed)
	pub := newPublicKey(priv.Public().(ed25519.PublicKey))
	return &SigningKey{priv: priv, pub: pub, protected: protectedHeader(coseAlgEdDSA, pub.kid)}
}

// GenerateSigningKey returns a new random Ed25519 key.
func GenerateSigningKey() (*SigningKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("wire: generate signing key: %w", err)
	}
	return newSigningKey(seed), nil
}

// Public returns the key's public half.
func (k *SigningKey) Public() *PublicKey { return k.pub }

// marshalPrivateCOSEKey returns {1: 1, -1: 6, -2: x, -4: d}.
func (k *SigningKey) marshalPrivateCOSEKey() []byte {
	b, err := Marshal(okpPrivateKey{Kty: coseKtyOKP, Crv: coseCrvEd, X: k.pub.key, D: k.priv.Seed()})
	if err != nil {
		panic(err)
	}
	return b
}

// parseSigningKey parses a private Ed25519 COSE_Key and checks that x is the
// public key of d.
func parseSigningKey(coseKey []byte) (*SigningKey, error) {
	var k okpPrivateKey
	if err := Unmarshal(coseKey, &k); err != nil {
		return nil, fmt.Errorf("wire: parse signing key: %w", err)
	}
	if err := checkOKP(k.Kty, k.Crv, k.X); err != nil {
		return nil, err
	}
	if len(k.D) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: Ed25519 d is %d bytes, want %d", ErrMalformed, len(k.D), ed25519.SeedSize)
	}
	sk := newSigningKey(k.D)
	if subtle.ConstantTimeCompare(sk.pub.key, k.X) != 1 {
		return nil, fmt.Errorf("%w: COSE_Key x is not the public key of d", ErrMalformed)
	}
	return sk, nil
}

// protectedHeader encodes {1: alg, 4: kid} deterministically.
func protectedHeader(alg int, kid KID) []byte {
	b := cborhead.Append(nil, majorMap, 2)
	b = cborhead.Append(b, majorUint, coseHdrAlg)
	b = cborhead.Append(b, majorNeg, uint64(-1-alg))
	b = cborhead.Append(b, majorUint, coseHdrKID)
	return appendBytes(b, kid[:])
}
