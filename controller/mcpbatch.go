package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/mcpproxy"
)

// JSON-RPC batches (a message that is an array of messages; at most
// mcpproxy.MaxBatchMembers of them, mcpproxy.CheckBatch). MCP
// 2025-06-18 removed them; 2024-11-05 and 2025-03-26 have them. go-sdk
// v1.8.0 on a line stream (mcp.IOTransport) ends the session on any batch
// it does not serve: on a session of a version without batches, on an
// empty batch, on a member it cannot decode, and on a request id repeated
// in a batch; and a batch with a notification in it is never answered (it
// waits for an answer to the notification), a second such batch ending
// the session. So steward reads every batch first (batchVerdict) and
// passes on only one go-sdk serves whole; any other is answered here, and
// nothing of it is run. Over streamable HTTP go-sdk refuses what it does
// not serve with a plain-text 400 and keeps the session; steward answers
// those with JSON-RPC errors instead (mcphttp.go).

// protocolHasBatches reports whether MCP protocol version v has JSON-RPC
// batches (those before 2025-06-18).
func protocolHasBatches(v string) bool { return v != "" && v < "2025-06-18" }

// negotiatedProtocol is the version go-sdk's server answers an initialize
// asking for client with (go-sdk's negotiatedVersion, for the server's
// default versions): the client's, when the server supports it and it is
// older than the sessionless protocol, else the newest older one.
func negotiatedProtocol(client string) string {
	supported := mcp.SupportedProtocolVersions()
	if slices.Contains(supported, client) && client < sessionlessProtocol {
		return client
	}
	for _, v := range supported {
		if v < sessionlessProtocol {
			return v
		}
	}
	return client
}

// batchMember is one message of a batch as steward reads it.
type batchMember struct {
	id      []byte // a request's id, or a refused member's (IDScan; nil when none can be echoed)
	request bool   // a method and an id: a request, owed an answer
	notice  bool   // a method and no id: a notification
	refusal []byte // the answer to a member refused as a line would be
}

// batchVerdict reads a batch line (its first non-space byte is '[') for a
// session at protocol version (""; none negotiated yet) and says whether it
// is passed on (pass), or else the answer, one JSON-RPC error object each
// without a newline. asArray: the answer is one JSON array (a batch
// response, which a client of a version with batches expects); otherwise
// each error is a line of its own. notificationsOK: go-sdk serves a batch
// with a notification in it (over HTTP; not on a line stream).
func batchVerdict(line []byte, version string, initialized, notificationsOK bool) (answers [][]byte, asArray, pass bool) {
	asArray = initialized && protocolHasBatches(version)
	raws, code, text, ok := mcpproxy.CheckBatch(line)
	if !ok {
		return [][]byte{errorObject(nil, code, "steward: "+text)}, false, false
	}
	members := make([]batchMember, len(raws))
	for i, raw := range raws {
		members[i] = readBatchMember(raw)
	}
	reason := batchRefusal(members, version, initialized, notificationsOK)
	if reason == "" {
		return nil, false, true
	}
	for _, m := range members {
		switch {
		case m.refusal != nil:
			answers = append(answers, bytes.TrimSuffix(m.refusal, []byte("\n")))
		case m.request:
			answers = append(answers, errorObject(m.id, mcpproxy.CodeInvalidRequest, "steward: "+reason))
		}
	}
	if len(answers) == 0 {
		// Notifications and responses alone: JSON-RPC answers none of
		// them, but the batch was not run and the peer is told so.
		answers = [][]byte{errorObject(nil, mcpproxy.CodeInvalidRequest, "steward: "+reason)}
	}
	return answers, asArray, false
}

// batchRefusal says why a batch of members is not passed on, or "".
func batchRefusal(members []batchMember, version string, initialized, notificationsOK bool) string {
	switch {
	case !initialized:
		return "a batch before initialize; a session begins with an initialize request on a line of its own"
	case !protocolHasBatches(version):
		return fmt.Sprintf("batches are not part of MCP protocol version %s; send each message on a line of its own", version)
	}
	seen := map[string]bool{}
	for _, m := range members {
		switch {
		case m.refusal != nil:
			return "not run: another message of its batch was refused"
		case m.notice && !notificationsOK:
			return "not run: its batch holds a notification, which this server does not serve in a batch; send notifications on lines of their own"
		case m.request && m.id != nil:
			if seen[string(m.id)] {
				return fmt.Sprintf("not run: its batch repeats the request id %s; each request of a batch needs its own id", m.id)
			}
			seen[string(m.id)] = true
		}
	}
	return ""
}

// readBatchMember checks one member of a batch (CheckBatch found it JSON,
// unless nested past the bound) as a line would be (CheckLine,
// messageRefusal) and classifies it.
func readBatchMember(raw []byte) (m batchMember) {
	if code, text, id, ok := mcpproxy.CheckLine(raw); !ok {
		m.id = id
		m.refusal = mcpproxy.ErrorLine(id, code, "steward: "+text)
		return m
	}
	if refusal := messageRefusal(raw); refusal != nil {
		m.refusal = refusal
		return m
	}
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	json.Unmarshal(raw, &head) // it decoded as a message just now
	m.request = head.Method != nil && len(head.ID) > 0 && !bytes.Equal(head.ID, nullID)
	if m.request {
		// The id as the request has it (a string or number, or it would
		// not have decoded), however long: go-sdk answers a request so.
		m.id = head.ID
	}
	m.notice = head.Method != nil && !m.request
	return m
}

// skipSpace is the index of the first byte of b at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// errorObject is a JSON-RPC error answering the request whose id is id
// (nil: null), without a newline.
func errorObject(id []byte, code int, message string) []byte {
	return bytes.TrimSuffix(mcpproxy.ErrorLine(id, code, message), []byte("\n"))
}

// batchAnswer is the bytes that answer a refused batch: the errors as one
// array line, or each on a line of its own.
func batchAnswer(answers [][]byte, asArray bool) []byte {
	if asArray {
		return append(append([]byte("["), bytes.Join(answers, []byte(","))...), "]\n"...)
	}
	return append(bytes.Join(answers, []byte("\n")), '\n')
}
