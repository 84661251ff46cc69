package wire

import (
	"crypto/rand"
	"fmt"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"

	"github.com/stewardrt/steward/internal/cborhead"
)

// akpPublicKey is the COSE_Key of an ML-DSA-65 public key
// (draft-ietf-cose-dilithium): {1: 7 (AKP), 3: -49 (ML-DSA-65), -1: pub}.
type akpPublicKey struct {
	Kty int    `cbor:"1,keyasint"`
	Alg int    `cbor:"3,keyasint"`
	Pub []byte `cbor:"-1,keyasint"`
}

// akpPrivateKey adds priv (-2), the 32-byte ML-DSA seed, to akpPublicKey.
type akpPrivateKey struct {
	Kty  int    `cbor:"1,keyasint"`
	Alg  int    `cbor:"3,keyasint"`
	Pub  []byte `cbor:"-1,keyasint"`
	Priv []byte `cbor:"-2,keyasint"`
}

// HybridPublicKey is the public half of a HybridSigningKey: an Ed25519 key and
// an ML-DSA-65 key, both of which must verify every hybrid signature.
type HybridPublicKey struct {
	ed     *PublicKey
	ml     *mldsa65.PublicKey
	mlCose []byte
	mlKID  KID
	cose   []byte // the COSE_KeySet [ed, ml]
}

func newHybridPublicKey(ed *PublicKey, ml *mldsa65.PublicKey) *HybridPublicKey {
	mlCose, err := Marshal(akpPublicKey{Kty: coseKtyAKP, Alg: coseAlgMLDSA, Pub: ml.Bytes()})
	if err != nil {
		panic(err)
	}
	set := cborhead.Append(nil, majorArray, 2)
	set = append(set, ed.cose...)
	set = append(set, mlCose...)
	return &HybridPublicKey{ed: ed, ml: ml, mlCose: mlCose, mlKID: kidOf(mlCose), cose: set}
}

// KID returns the KID of the Ed25519 half, which names the hybrid key.
func (h *HybridPublicKey) KID() KID { return h.ed.kid }

// MLDSAKID returns the KID of the ML-DSA-65 half: the first 16 bytes of
// SHA-256 of its public COSE_Key. It is the kid of the ML-DSA signature.
func (h *HybridPublicKey) MLDSAKID() KID { return h.mlKID }

// Ed25519 returns the Ed25519 half.
func (h *HybridPublicKey) Ed25519() *PublicKey { return h.ed }

// MarshalCOSEKey returns the COSE_KeySet [Ed25519 COSE_Key, ML-DSA-65
// COSE_Key], deterministic CBOR. The caller must not modify the result.
func (h *HybridPublicKey) MarshalCOSEKey() []byte { return h.cose }

// Equal reports whether h and o are the same pair of keys.
func (h *HybridPublicKey) Equal(o *HybridPublicKey) bool {
	return h != nil && o != nil && h.ed.Equal(o.ed) && h.ml.Equal(o.ml)
}

// ParseHybridPublicKey parses a COSE_KeySet as MarshalCOSEKey writes it.
func ParseHybridPublicKey(b []byte) (*HybridPublicKey, error) {
	var set []RawMessage
	if err := Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("wire: parse hybrid public key: %w", err)
	}
	if len(set) != 2 {
		return nil, fmt.Errorf("%w: hybrid COSE_KeySet has %d keys, want 2", ErrMalformed, len(set))
	}
	ed, err := ParsePublicKey(set[0])
	if err != nil {
		return nil, fmt.Errorf("wire: parse hybrid public key: Ed25519 half: %w", err)
	}
	var k akpPublicKey
	if err := Unmarshal(set[1], &k); err != nil {
		return nil, fmt.Errorf("wire: parse hybrid public key: ML-DSA half: %w", err)
	}
	ml, err := parseMLDSAPublic(k.Kty, k.Alg, k.Pub)
	if err != nil {
		return nil, err
	}
	return newHybridPublicKey(ed, ml), nil
}

func parseMLDSAPublic(kty, alg int, pub []byte) (*mldsa65.PublicKey, error) {
	if kty != coseKtyAKP || alg != coseAlgMLDSA {
		return nil, fmt.Errorf("%w: COSE_Key is kty %d alg %d, want AKP (7) ML-DSA-65 (-49)", ErrMalformed, kty, alg)
	}
	if len(pub) != mldsa65.PublicKeySize {
		return nil, fmt.Errorf("%w: ML-DSA-65 pub is %d bytes, want %d", ErrMalformed, len(pub), mldsa65.PublicKeySize)
	}
	var ml mldsa65.PublicKey
	if err := ml.UnmarshalBinary(pub); err != nil {
		return nil, fmt.Errorf("%w: ML-DSA-65 pub: %w", ErrMalformed, err)
	}
	return &ml, nil
}

// HybridSigningKey signs long-lived authority (grants, route records,
// checkpoints) with Ed25519 and ML-DSA-65 together.
type HybridSigningKey struct {
	ed     *SigningKey
	ml     *mldsa65.PrivateKey
	mlSeed [mldsa65.SeedSize]byte
	pub    *HybridPublicKey
	mlProt []byte // protected header {1: -49, 4: ML-DSA kid}
}

func newHybridSigningKey(ed *SigningKey, seed *[mldsa65.SeedSize]byte) *HybridSigningKey {
	mlPub, mlPriv := mldsa65.NewKeyFromSeed(seed)
	pub := newHybridPublicKey(ed.pub, mlPub)
	return &HybridSigningKey{ed: ed, ml: mlPriv, mlSeed: *seed, pub: pub, mlProt: protectedHeader(coseAlgMLDSA, pub.mlKID)}
}

// GenerateHybridKey returns a new random Ed25519 + ML-DSA-65 key.
func GenerateHybridKey() (*HybridSigningKey, error) {
	ed, err := GenerateSigningKey()
	if err != nil {
		return nil, err
	}
	var seed [mldsa65.SeedSize]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("wire: generate hybrid key: %w", err)
	}
	return newHybridSigningKey(ed, &seed), nil
}

// Public returns the public half.
func (h *HybridSigningKey) Public() *HybridPublicKey { return h.pub }

// Ed25519 returns the Ed25519 half, usable for per-call Sign1 signatures.
func (h *HybridSigningKey) Ed25519() *SigningKey { return h.ed }

// marshalPrivate returns the COSE_KeySet of the two private COSE_Keys.
func (h *HybridSigningKey) marshalPrivate() []byte {
	ml, err := Marshal(akpPrivateKey{Kty: coseKtyAKP, Alg: coseAlgMLDSA, Pub: h.pub.ml.Bytes(), Priv: h.mlSeed[:]})
	if err != nil {
		panic(err)
	}
	set := cborhead.Append(nil, majorArray, 2)
	set = append(set, h.ed.marshalPrivateCOSEKey()...)
	return append(set, ml...)
}

// parseHybridSigningKey parses what marshalPrivate writes and checks that
// each public key is derived from its private seed.
func parseHybridSigningKey(b []byte) (*HybridSigningKey, error) {
	var set []RawMessage
	if err := Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("wire: parse hybrid signing key: %w", err)
	}
	if len(set) != 2 {
		return nil, fmt.Errorf("%w: hybrid COSE_KeySet has %d keys, want 2", ErrMalformed, len(set))
	}
	ed, err := parseSigningKey(set[0])
	if err != nil {
		return nil, fmt.Errorf("wire: parse hybrid signing key: Ed25519 half: %w", err)
	}
	var k akpPrivateKey
	if err := Unmarshal(set[1], &k); err != nil {
		return nil, fmt.Errorf("wire: parse hybrid signing key: ML-DSA half: %w", err)
	}
	mlPub, err := parseMLDSAPublic(k.Kty, k.Alg, k.Pub)
	if err != nil {
		return nil, err
	}
	if len(k.Priv) != mldsa65.SeedSize {
		return nil, fmt.Errorf("%w: ML-DSA-65 priv is %d bytes, want the %d-byte seed", ErrMalformed, len(k.Priv), mldsa65.SeedSize)
	}
	h := newHybridSigningKey(ed, (*[mldsa65.SeedSize]byte)(k.Priv))
	if !h.pub.ml.Equal(mlPub) {
		return nil, fmt.Errorf("%w: ML-DSA-65 pub is not the public key of priv", ErrMalformed)
	}
	return h, nil
}
