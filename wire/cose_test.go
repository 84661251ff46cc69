package wire

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stewardrt/steward/internal/cborhead"
)

func TestSign1Verify1(t *testing.T) {
	k := mustKey(t)
	keys := NewKeyring(k.Public())
	payload := []byte("an envelope")
	msg, err := Sign1(k, payload)
	if err != nil {
		t.Fatal(err)
	}
	got, signer, err := Verify1(msg, keys)
	if err != nil || !bytes.Equal(got, payload) || !signer.Equal(k.Public()) {
		t.Fatalf("good message: %q %v %v", got, signer, err)
	}

	// Offsets into msg: d2 84 58 15 <protected 21> a0 4b <payload 11> 58 40 <sig 64>.
	protOff := bytes.Index(msg, k.protected)
	payOff := bytes.Index(msg, payload)
	sigOff := len(msg) - ed25519SigLen
	flip := func(off int) []byte {
		m := bytes.Clone(msg)
		m[off] ^= 0x01
		return m
	}
	// The same header {4: kid, 1: -8} with its keys in the other order: the
	// same meaning, other bytes, so the signature over the original bytes fails.
	reordered := append([]byte{0xa2, 0x04, 0x50}, k.Public().KID().bytes()...)
	reordered = append(reordered, 0x01, 0x27)
	swapped := bytes.Clone(msg)
	copy(swapped[protOff:], reordered)

	other := mustKey(t)
	otherMsg, _ := Sign1(other, payload)
	for _, c := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"signature byte flipped", flip(sigOff + 10), ErrBadSignature},
		{"payload byte flipped", flip(payOff + 3), ErrBadSignature},
		{"protected header re-encoded", swapped, ErrBadSignature},
		{"protected kid byte flipped", flip(protOff + 5), ErrUnknownKID},
		{"protected alg flipped", flip(protOff + 2), ErrMalformed},
		{"unknown kid", otherMsg, ErrUnknownKID},
		{"truncated", msg[:len(msg)-1], ErrMalformed},
		{"trailing byte", append(bytes.Clone(msg), 0), ErrMalformed},
		{"untagged", msg[1:], ErrMalformed},
		{"not CBOR", []byte("garbage"), ErrMalformed},
		{"empty", nil, ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, s, err := Verify1(c.msg, keys)
			if !errors.Is(err, c.want) || p != nil || s != nil {
				t.Fatalf("err %v, want %v (payload %q)", err, c.want, p)
			}
		})
	}
}

func (k KID) bytes() []byte { return k[:] }

func TestSign1RefusesOtherHeaders(t *testing.T) {
	k := mustKey(t)
	keys := NewKeyring(k.Public())
	kid := k.Public().KID()
	build := func(protected []byte, unprotected byte, payload []byte) []byte {
		tbs := sign1ToBeSigned(protected, payload)
		sig := signEd(k, tbs)
		m := []byte{0xd2, 0x84}
		m = appendBytes(m, protected)
		m = append(m, unprotected)
		m = appendBytes(m, payload)
		return appendBytes(m, sig)
	}
	withCrit := cborhead.Append(nil, majorMap, 3)
	withCrit = append(withCrit, 0x01, 0x27, 0x02, 0x81, 0x01, 0x04)
	withCrit = appendBytes(withCrit, kid[:])
	shortKID := append([]byte{0xa2, 0x01, 0x27, 0x04, 0x48}, kid[:8]...)
	for _, c := range []struct {
		name string
		msg  []byte
	}{
		{"crit header", build(withCrit, 0xa0, []byte("x"))},
		{"8-byte kid", build(shortKID, 0xa0, []byte("x"))},
		{"non-empty unprotected", func() []byte {
			m := build(k.protected, 0xa0, []byte("x"))
			// replace the empty unprotected map by {} with one entry: {5: h''}
			i := 2 + cborhead.Len(uint64(len(k.protected))) + len(k.protected)
			return append(append(bytes.Clone(m[:i]), 0xa1, 0x05, 0x40), m[i+1:]...)
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Verify1(c.msg, keys); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
		})
	}
	// Sanity: build itself makes a message Verify1 accepts.
	if _, _, err := Verify1(build(k.protected, 0xa0, []byte("x")), keys); err != nil {
		t.Fatal(err)
	}
}

func TestHybrid(t *testing.T) {
	h, err := GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("a route record")
	msg, err := SignHybrid(h, payload)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyHybrid(msg, h.Public())
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("good: %q %v", got, err)
	}
	// Layout: d8 62 84 40 a0 4e <payload 14> 82
	//   83 58 15 <ed prot 21> a0 58 40 <ed sig 64>
	//   83 58 17 <ml prot 23> a0 59 0c ed <ml sig 3309>
	edSigOff := bytes.Index(msg, h.ed.protected) + len(h.ed.protected) + 3
	mlSigOff := len(msg) - 3309
	flip := func(off int) []byte {
		m := bytes.Clone(msg)
		m[off] ^= 0x80
		return m
	}
	other, _ := GenerateHybridKey()
	// A message with only the Ed25519 signature.
	edOnly := bytes.Clone(msg[:mlSigOff-3-len(h.mlProt)-3-1])
	edOnly[bytes.IndexByte(edOnly, 0x82)] = 0x81
	for _, c := range []struct {
		name string
		msg  []byte
		pub  *HybridPublicKey
		want error
	}{
		{"Ed25519 signature bad", flip(edSigOff + 7), h.Public(), ErrBadSignature},
		{"ML-DSA-65 signature bad", flip(mlSigOff + 1000), h.Public(), ErrBadSignature},
		{"payload changed", flip(6), h.Public(), ErrBadSignature},
		{"another key", msg, other.Public(), ErrUnknownKID},
		{"one signature only", edOnly, h.Public(), ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := VerifyHybrid(c.msg, c.pub)
			if !errors.Is(err, c.want) || p != nil {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
	// The Ed25519 half signs per-call Sign1 messages that its public half verifies.
	m1, _ := Sign1(h.Ed25519(), payload)
	if _, _, err := Verify1(m1, NewKeyring(h.Public().Ed25519())); err != nil {
		t.Fatal(err)
	}
	if h.Public().KID() != h.Ed25519().Public().KID() {
		t.Fatal("hybrid KID is not the Ed25519 half's")
	}
}

func TestPublicKeyEncoding(t *testing.T) {
	k := mustKey(t)
	p := k.Public()
	enc := p.MarshalCOSEKey()
	// {1: 1, -1: 6, -2: h'<32>'}
	want := append([]byte{0xa3, 0x01, 0x01, 0x20, 0x06, 0x21, 0x58, 0x20}, p.Ed25519()...)
	if !bytes.Equal(enc, want) {
		t.Fatalf("COSE_Key % x, want % x", enc, want)
	}
	q, err := ParsePublicKey(enc)
	if err != nil || !q.Equal(p) || q.KID() != p.KID() {
		t.Fatalf("round trip: %v %v", q, err)
	}
	// A private key where a public key is expected is refused, not silently stripped.
	if _, err := ParsePublicKey(k.marshalPrivateCOSEKey()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("private COSE_Key as public: %v", err)
	}
	bad := bytes.Clone(enc)
	bad[4] = 0x04 // crv X25519
	if _, err := ParsePublicKey(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("X25519 key: %v", err)
	}

	h, _ := GenerateHybridKey()
	hp, err := ParseHybridPublicKey(h.Public().MarshalCOSEKey())
	if err != nil || !hp.Equal(h.Public()) || hp.MLDSAKID() != h.Public().MLDSAKID() {
		t.Fatalf("hybrid round trip: %v", err)
	}
	if _, err := ParseHybridPublicKey(enc); !errors.Is(err, ErrMalformed) {
		t.Fatalf("single key as hybrid: %v", err)
	}
	if s := p.KID().String(); len(s) != 32 || s != hex.EncodeToString(enc2kid(enc)) {
		t.Fatalf("KID string %q", s)
	}
}

func signEd(k *SigningKey, tbs []byte) []byte {
	return ed25519.Sign(k.priv, tbs)
}

func enc2kid(coseKey []byte) []byte {
	sum := sha256.Sum256(coseKey)
	return sum[:16]
}
