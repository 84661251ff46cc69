package controller

import (
	"github.com/stewardrt/steward/wire/msg"
)

// Journal identity.
const (
	JournalOwner  = "steward-controller"
	JournalFormat = "steward-controller-journal-v1"
)

// Record kinds of the controller journal (see doc.go).
const (
	kindBegin    = "begin"
	kindResult   = "result"
	kindResolve  = "resolve"
	kindFgSubmit = "fg-submit"
	kindFgResult = "fg-result"
	kindFgAck    = "fg-ack"
)

// beginRecord is journaled before anything of a call is sent.
type beginRecord struct {
	Attempt        string `cbor:"attempt"`
	Tool           string `cbor:"tool"`
	Application    string `cbor:"application"`
	Operation      string `cbor:"operation"`
	RequestID      string `cbor:"requestId"`
	ConversationID string `cbor:"conversationId"`
	Arguments      []byte `cbor:"arguments"` // the tool's arguments, canonical JSON
	Kind           string `cbor:"kind"`
	Method         string `cbor:"method"`
	Path           string `cbor:"path"`
	Body           []byte `cbor:"body"`
	RequestSHA256  []byte `cbor:"requestSha256"`
	Route          string `cbor:"route"`
	Foreground     string `cbor:"foreground"` // the foreground request id, "" for MCP
}

// resultRecord is journaled when a dispatch ends with an answer or a
// refusal. Receipt is the host-signed receipt from the dispatch reply.
type resultRecord struct {
	Attempt string       `cbor:"attempt"`
	Outcome string       `cbor:"outcome"`
	Status  int          `cbor:"status"`
	Body    []byte       `cbor:"body"`
	Receipt []byte       `cbor:"receipt"`
	Refusal *msg.Refusal `cbor:"refusal"`
	Detail  string       `cbor:"detail"`
}

// Resolution states journaled by `attempts resolve`.
const (
	ResolvedDefinite  = "definite"  // the host recorded an answer: it is the replay answer
	ResolvedAbandoned = "abandoned" // the host never saw the attempt
	ResolvedReleased  = "released"  // the host recorded it as not sent
)

// resolveRecord settles an attempt that was left uncertain, from what the
// host reported. For a definite resolution it carries the host's answer.
type resolveRecord struct {
	Attempt string `cbor:"attempt"`
	State   string `cbor:"state"`
	By      string `cbor:"by"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Detail  string `cbor:"detail"`
}

// fgSubmitRecord is journaled when a foreground request is accepted.
type fgSubmitRecord struct {
	ID        string `cbor:"id"`
	Tool      string `cbor:"tool"`
	Arguments []byte `cbor:"arguments"`
}

// fgResultRecord keeps a foreground request's result until acknowledged.
type fgResultRecord struct {
	ID     string `cbor:"id"`
	Result []byte `cbor:"result"` // the ToolResult as JSON
}

// fgAckRecord forgets a foreground result.
type fgAckRecord struct {
	ID string `cbor:"id"`
}
