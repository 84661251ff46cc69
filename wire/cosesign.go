package wire

import (
	"crypto/ed25519"
	"fmt"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"

	"github.com/stewardrt/steward/internal/cborhead"
)

// SignHybrid signs payload as a tagged COSE_Sign (RFC 9052, tag 98) with an
// empty body protected header and two signatures, in this order: EdDSA with
// protected {1: -8, 4: Ed25519 kid}, then ML-DSA-65 with protected
// {1: -49, 4: ML-DSA kid}. ML-DSA is the pure, hedged variant with an empty
// context string, over the same Sig_structure encoding as EdDSA.
func SignHybrid(k *HybridSigningKey, payload []byte) ([]byte, error) {
	edSig := ed25519.Sign(k.ed.priv, signToBeSigned(k.ed.protected, payload))
	mlSig := make([]byte, mldsa65.SignatureSize)
	if err := mldsa65.SignTo(k.ml, signToBeSigned(k.mlProt, payload), nil, true, mlSig); err != nil {
		return nil, fmt.Errorf("wire: ML-DSA-65 sign: %w", err)
	}
	msg := make([]byte, 0, len(payload)+len(mlSig)+len(edSig)+len(k.ed.protected)+len(k.mlProt)+32)
	msg = cborhead.Append(msg, majorTag, coseTagSign)
	msg = cborhead.Append(msg, majorArray, 4)
	msg = appendBytes(msg, nil)
	msg = cborhead.Append(msg, majorMap, 0)
	msg = appendBytes(msg, payload)
	msg = cborhead.Append(msg, majorArray, 2)
	for _, s := range [2]struct{ prot, sig []byte }{{k.ed.protected, edSig}, {k.mlProt, mlSig}} {
		msg = cborhead.Append(msg, majorArray, 3)
		msg = appendBytes(msg, s.prot)
		msg = cborhead.Append(msg, majorMap, 0)
		msg = appendBytes(msg, s.sig)
	}
	return msg, nil
}

// signToBeSigned encodes ["Signature", empty body protected, sign_protected,
// empty external_aad, payload].
func signToBeSigned(signProtected, payload []byte) []byte {
	b := make([]byte, 0, 16+len(signProtected)+len(payload)+2*9)
	b = cborhead.Append(b, majorArray, 5)
	b = appendText(b, signContext)
	b = appendBytes(b, nil)
	b = appendBytes(b, signProtected)
	b = appendBytes(b, nil)
	return appendBytes(b, payload)
}

// VerifyHybrid verifies a COSE_Sign made by SignHybrid under pub and returns
// the payload (a subslice of msg). Both signatures must verify; their kids
// must be pub's two kids. One bad signature refuses the whole message.
func VerifyHybrid(msg []byte, pub *HybridPublicKey) ([]byte, error) {
	r := cborReader{b: msg}
	if err := r.expect(majorTag, coseTagSign, "COSE_Sign tag"); err != nil {
		return nil, err
	}
	if err := r.expect(majorArray, 4, "COSE_Sign array"); err != nil {
		return nil, err
	}
	if err := r.expect(majorBytes, 0, "COSE_Sign body protected (must be empty)"); err != nil {
		return nil, err
	}
	if err := r.expect(majorMap, 0, "COSE_Sign unprotected (must be empty)"); err != nil {
		return nil, err
	}
	payload, err := r.bytes("COSE_Sign payload")
	if err != nil {
		return nil, err
	}
	if err := r.expect(majorArray, 2, "COSE_Sign signatures (must be two)"); err != nil {
		return nil, err
	}
	var prot, sig [2][]byte
	for i := range 2 {
		if err := r.expect(majorArray, 3, "COSE_Signature array"); err != nil {
			return nil, err
		}
		if prot[i], err = r.bytes("COSE_Signature protected"); err != nil {
			return nil, err
		}
		if err := r.expect(majorMap, 0, "COSE_Signature unprotected (must be empty)"); err != nil {
			return nil, err
		}
		if sig[i], err = r.bytes("COSE_Signature signature"); err != nil {
			return nil, err
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	edKID, err := parseProtected(prot[0], coseAlgEdDSA)
	if err != nil {
		return nil, fmt.Errorf("wire: first COSE_Signature: %w", err)
	}
	mlKID, err := parseProtected(prot[1], coseAlgMLDSA)
	if err != nil {
		return nil, fmt.Errorf("wire: second COSE_Signature: %w", err)
	}
	if edKID != pub.ed.kid {
		return nil, fmt.Errorf("%w: EdDSA signature kid %s, want %s", ErrUnknownKID, edKID, pub.ed.kid)
	}
	if mlKID != pub.mlKID {
		return nil, fmt.Errorf("%w: ML-DSA-65 signature kid %s, want %s", ErrUnknownKID, mlKID, pub.mlKID)
	}
	if len(sig[0]) != ed25519SigLen || !ed25519.Verify(pub.ed.key, signToBeSigned(prot[0], payload), sig[0]) {
		return nil, fmt.Errorf("%w: hybrid EdDSA signature does not verify under kid %s", ErrBadSignature, edKID)
	}
	if len(sig[1]) != mldsa65.SignatureSize || !mldsa65.Verify(pub.ml, signToBeSigned(prot[1], payload), nil, sig[1]) {
		return nil, fmt.Errorf("%w: hybrid ML-DSA-65 signature does not verify under kid %s", ErrBadSignature, mlKID)
	}
	return payload, nil
}
