package oracleops

import (
	"crypto/sha256"
	"encoding/base64"
)

// scopedConversationDomain separates the scoped conversationId's hash from
// the scoped requestId's and every other SHA-256 steward computes.
const scopedConversationDomain = "steward-conversation-id/v1\x00"

// ScopedConversationID is the conversationId an application sees for an
// agent's conversationId: "c" and the unpadded base64url of
// SHA-256(domain, agent, NUL, conversationId), 44 characters of
// A-Za-z0-9_-, within MaxIDLen. Two agents naming one conversationId are
// two conversations at the application, and an agent's same id is always
// the same one there: it is derived, never stored, so a replay, a collect
// or a redelivery carries the same id. The controller builds invoke bodies
// with it; the host recomputes it to check the agent's own id a dispatch
// names beside the body (msg.Dispatch.ConversationName), which the host
// shows to approvers and advisors in place of the opaque one.
func ScopedConversationID(agent, conversationID string) string {
	h := sha256.New()
	h.Write([]byte(scopedConversationDomain))
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(conversationID))
	var sum [sha256.Size]byte
	return "c" + base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}
