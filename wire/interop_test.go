package wire

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"testing"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
	cose "github.com/veraison/go-cose"
)

// These tests check this package's hand-built COSE against an independent
// implementation, veraison/go-cose, in both directions.

func TestInteropSign1OursVerifiedByGoCOSE(t *testing.T) {
	k := mustKey(t)
	payload := []byte(`{"v":1} as if it were an envelope`)
	msg, err := Sign1(k, payload)
	if err != nil {
		t.Fatal(err)
	}
	var m cose.Sign1Message
	if err := m.UnmarshalCBOR(msg); err != nil {
		t.Fatalf("go-cose cannot parse our COSE_Sign1: %v", err)
	}
	v, err := cose.NewVerifier(cose.AlgorithmEdDSA, k.Public().Ed25519())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(nil, v); err != nil {
		t.Fatalf("go-cose does not verify our COSE_Sign1: %v", err)
	}
	kid := k.Public().KID()
	if got, _ := m.Headers.Protected[cose.HeaderLabelKeyID].([]byte); !bytes.Equal(got, kid[:]) {
		t.Fatalf("go-cose reads kid % x, want % x", got, kid[:])
	}
	if alg, err := m.Headers.Protected.Algorithm(); err != nil || alg != cose.AlgorithmEdDSA {
		t.Fatalf("go-cose reads alg %v %v", alg, err)
	}
	if !bytes.Equal(m.Payload, payload) || len(m.Headers.Unprotected) != 0 {
		t.Fatalf("go-cose reads payload %q, unprotected %v", m.Payload, m.Headers.Unprotected)
	}
	// And go-cose refuses it when tampered, as we do.
	msg[len(msg)-1] ^= 1
	var bad cose.Sign1Message
	if err := bad.UnmarshalCBOR(msg); err != nil {
		t.Fatal(err)
	}
	if err := bad.Verify(nil, v); err == nil {
		t.Fatal("go-cose verified a tampered signature")
	}
}

func TestInteropSign1GoCOSEVerifiedByOurs(t *testing.T) {
	k := mustKey(t)
	kid := k.Public().KID()
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, k.priv)
	if err != nil {
		t.Fatal(err)
	}
	headers := cose.Headers{Protected: cose.ProtectedHeader{
		cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA,
		cose.HeaderLabelKeyID:     kid[:],
	}}
	payload := []byte("signed by go-cose")
	msg, err := cose.Sign1(rand.Reader, signer, headers, payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, signerKey, err := Verify1(msg, NewKeyring(k.Public()))
	if err != nil {
		t.Fatalf("we do not verify go-cose's COSE_Sign1: %v", err)
	}
	if !bytes.Equal(got, payload) || !signerKey.Equal(k.Public()) {
		t.Fatalf("payload %q signer %v", got, signerKey)
	}
	// Ed25519 is deterministic: go-cose's message is byte for byte ours.
	ours, _ := Sign1(k, payload)
	if !bytes.Equal(ours, msg) {
		t.Fatalf("go-cose % x\nours    % x", msg, ours)
	}
	// go-cose without a kid: we refuse it (the kid is how we find the key).
	noKID, _ := cose.Sign1(rand.Reader, signer, cose.Headers{Protected: cose.ProtectedHeader{
		cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA}}, payload, nil)
	if _, _, err := Verify1(noKID, NewKeyring(k.Public())); !errors.Is(err, ErrMalformed) {
		t.Fatalf("message without kid: %v", err)
	}
}

// mldsaCOSE is a go-cose Signer and Verifier for ML-DSA-65 (alg -49), which
// go-cose v1.3.0 does not know; it signs exactly the bytes go-cose hands it.
type mldsaCOSE struct {
	priv *mldsa65.PrivateKey
	pub  *mldsa65.PublicKey
}

func (m mldsaCOSE) Algorithm() cose.Algorithm { return cose.Algorithm(coseAlgMLDSA) }

func (m mldsaCOSE) Sign(_ io.Reader, content []byte) ([]byte, error) {
	sig := make([]byte, mldsa65.SignatureSize)
	err := mldsa65.SignTo(m.priv, content, nil, true, sig)
	return sig, err
}

func (m mldsaCOSE) Verify(content, sig []byte) error {
	if !mldsa65.Verify(m.pub, content, nil, sig) {
		return cose.ErrVerification
	}
	return nil
}

func TestInteropHybridBothWays(t *testing.T) {
	h, err := GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	edV, err := cose.NewVerifier(cose.AlgorithmEdDSA, h.Public().Ed25519().Ed25519())
	if err != nil {
		t.Fatal(err)
	}
	ml := mldsaCOSE{priv: h.ml, pub: h.pub.ml}
	payload := []byte("a checkpoint")

	// Ours, verified by go-cose with both verifiers.
	msg, err := SignHybrid(h, payload)
	if err != nil {
		t.Fatal(err)
	}
	var m cose.SignMessage
	if err := m.UnmarshalCBOR(msg); err != nil {
		t.Fatalf("go-cose cannot parse our COSE_Sign: %v", err)
	}
	if err := m.Verify(nil, edV, ml); err != nil {
		t.Fatalf("go-cose does not verify our COSE_Sign: %v", err)
	}

	// go-cose's, verified by ours.
	edS, err := cose.NewSigner(cose.AlgorithmEdDSA, h.ed.priv)
	if err != nil {
		t.Fatal(err)
	}
	edKID, mlKID := h.Public().KID(), h.Public().MLDSAKID()
	sigEd, sigML := cose.NewSignature(), cose.NewSignature()
	sigEd.Headers.Protected = cose.ProtectedHeader{cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA, cose.HeaderLabelKeyID: edKID[:]}
	sigML.Headers.Protected = cose.ProtectedHeader{cose.HeaderLabelAlgorithm: cose.Algorithm(coseAlgMLDSA), cose.HeaderLabelKeyID: mlKID[:]}
	gm := cose.NewSignMessage()
	gm.Payload = payload
	gm.Signatures = []*cose.Signature{sigEd, sigML}
	if err := gm.Sign(rand.Reader, nil, edS, ml); err != nil {
		t.Fatal(err)
	}
	theirs, err := gm.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyHybrid(theirs, h.Public())
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("we do not verify go-cose's COSE_Sign: %q %v", got, err)
	}
	// go-cose with the ML-DSA signature broken: we refuse it.
	gm.Signatures[1].Signature[5] ^= 1
	broken, _ := gm.MarshalCBOR()
	if _, err := VerifyHybrid(broken, h.Public()); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("go-cose message with a bad ML-DSA signature: %v", err)
	}
}

func TestInteropCOSEKey(t *testing.T) {
	k := mustKey(t)
	var gk cose.Key
	if err := gk.UnmarshalCBOR(k.Public().MarshalCOSEKey()); err != nil {
		t.Fatalf("go-cose cannot parse our COSE_Key: %v", err)
	}
	pub, err := gk.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if !k.Public().Ed25519().Equal(pub.(ed25519.PublicKey)) {
		t.Fatal("go-cose reads another public key")
	}
	// go-cose's own encoding of the same key parses with ours.
	theirs, err := cose.NewKeyOKP(cose.AlgorithmEdDSA, k.Public().Ed25519(), nil)
	if err != nil {
		t.Fatal(err)
	}
	theirs.Algorithm = cose.AlgorithmReserved // our profile carries no alg in a COSE_Key
	enc, err := theirs.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePublicKey(enc)
	if err != nil || !p.Equal(k.Public()) {
		t.Fatalf("go-cose COSE_Key % x: %v", enc, err)
	}
	if !bytes.Equal(enc, k.Public().MarshalCOSEKey()) {
		t.Fatalf("go-cose % x\nours    % x", enc, k.Public().MarshalCOSEKey())
	}
}
