package controller

import (
	"crypto/sha256"
	"encoding/base64"
)

// scopedIDDomain separates the scoped requestId's hash from every other
// SHA-256 steward computes.
const scopedIDDomain = "steward-request-id/v1\x00"

// ScopedRequestID is the requestId the application sees for an agent's
// requestId: "s" and the unpadded base64url of SHA-256(domain, agent, NUL,
// requestId), 44 characters of A-Za-z0-9_-, within oracle-operations-v1's
// 80. The application deduplicates by it, so two agents' "r1" are two
// requests there too; it is derived, never stored anywhere it could be
// lost, so a replay or the operator's redelivery carries the same id.
func ScopedRequestID(agent, requestID string) string {
	h := sha256.New()
	h.Write([]byte(scopedIDDomain))
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(requestID))
	var sum [sha256.Size]byte
	return "s" + base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}
