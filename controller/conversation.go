package controller

import (
	"encoding/json"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

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
