package controller

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// scopedConversationDomain separates the scoped conversationId's hash from
// the scoped requestId's (scopedIDDomain) and every other SHA-256 steward
// computes.
const scopedConversationDomain = "steward-conversation-id/v1\x00"

// ScopedConversationID is the conversationId the application sees for an
// agent's conversationId: "c" and the unpadded base64url of
// SHA-256(domain, agent, NUL, conversationId), 44 characters of
// A-Za-z0-9_-, within oracle-operations-v1's 80. As with the requestId
// (ScopedRequestID), two agents naming one conversationId are two
// conversations at the application, and an agent's same id is always the
// same one there: it is derived, never stored anywhere it could be lost,
// so a replay, a collect or the operator's redelivery carries the same
// id. The host reads it from the canonical body and counts conversations
// per agent, so its counts and receipts name the scoped id.
func ScopedConversationID(agent, conversationID string) string {
	h := sha256.New()
	h.Write([]byte(scopedConversationDomain))
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(conversationID))
	var sum [sha256.Size]byte
	return "c" + base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}

// sameUnscopedConversation reports whether an attempt begun before the
// conversationId was scoped, whose request hash is sha, asked what p
// asks: the same request built with the agent's conversationId itself
// (and, for one begun before agents, its requestId too: unscopedID), as
// bodies were then.
func (c *Controller) sameUnscopedConversation(p *plan, sha [32]byte, unscopedID bool) bool {
	var body oracleops.InvokeBody
	if p.kind != msg.KindInvoke || json.Unmarshal(p.req.Body, &body) != nil {
		return false
	}
	body.ConversationID = p.conversationID
	if unscopedID {
		body.RequestID = p.requestID
	}
	req, err := oracleops.BuildInvoke(p.route.Prefix, body)
	return err == nil && req.SHA256() == sha
}
