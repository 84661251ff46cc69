package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/mcpproxy"
)

// JSON-RPC batches (a message that is an array of messages). MCP
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

// MaxBatchMembers bounds the messages in one batch. A refused batch is
// answered per request, about 200 bytes each: without the bound a line of
// 65,536 bytes ("[1,1,...]") would draw some 6 MB of answers.
const MaxBatchMembers = 128

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
	id      []byte // its id (IDScan), nil when none can be echoed
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
	raws, ok := splitBatch(line)
	switch {
	case !ok:
		return [][]byte{errorObject(nil, mcpproxy.CodeParseError, "steward: request line is not JSON")}, false, false
	case len(raws) == 0:
		return [][]byte{errorObject(nil, mcpproxy.CodeInvalidRequest, "steward: an empty batch is not a request; a batch holds one message or more")}, false, false
	case len(raws) > MaxBatchMembers:
		return [][]byte{errorObject(nil, mcpproxy.CodeInvalidRequest,
			fmt.Sprintf("steward: a batch of %d messages exceeds the bound of %d messages; nothing of it was run", len(raws), MaxBatchMembers))}, false, false
	}
	members := make([]batchMember, len(raws))
	for i, raw := range raws {
		m, valid := readBatchMember(raw)
		if !valid {
			// JSON-RPC answers a batch that is not JSON with one parse
			// error, as a line.
			return [][]byte{errorObject(nil, mcpproxy.CodeParseError, "steward: request line is not JSON")}, false, false
		}
		members[i] = m
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

// readBatchMember checks one member of a batch as a line would be
// (CheckLine, notAMessage) and classifies it; valid is false when it is
// not JSON (nesting past the bound is its own refusal, checked first).
func readBatchMember(raw []byte) (m batchMember, valid bool) {
	code, text, id, ok := mcpproxy.CheckLine(raw)
	switch {
	case ok:
	case code == mcpproxy.CodeParseError:
		return m, false
	default:
		m.id = id
		m.refusal = mcpproxy.ErrorLine(id, code, "steward: "+text)
		return m, true
	}
	if refusal := messageRefusal(raw); refusal != nil {
		m.refusal = refusal
		return m, true
	}
	var scan mcpproxy.IDScan
	scan.Write(raw)
	m.id = scan.ID()
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	json.Unmarshal(raw, &head) // it decoded as a message just now
	m.request = head.Method != nil && len(head.ID) > 0 && !bytes.Equal(head.ID, nullID)
	m.notice = head.Method != nil && !m.request
	return m, true
}

// splitBatch cuts a JSON array into its members' bytes without decoding
// them (each is checked on its own, the array's nesting not counted
// against its member's); ok is false when line is not one array of
// comma-separated values followed by white space alone. Whether each
// member is JSON is left to the member's check.
func splitBatch(line []byte) (members [][]byte, ok bool) {
	i := skipSpace(line, 0)
	if i == len(line) || line[i] != '[' {
		return nil, false
	}
	i++
	depth, start, inString, escape := 0, i, false, false
	for ; i < len(line); i++ {
		c := line[i]
		if inString {
			switch {
			case escape:
				escape = false
			case c == '\\':
				escape = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}':
			depth--
		case ']':
			if depth == 0 {
				last := bytes.TrimSpace(line[start:i])
				if len(last) > 0 {
					members = append(members, last)
				} else if len(members) > 0 {
					return nil, false // a trailing comma
				}
				return members, skipSpace(line, i+1) == len(line)
			}
			depth--
		case ',':
			if depth == 0 {
				m := bytes.TrimSpace(line[start:i])
				if len(m) == 0 {
					return nil, false
				}
				members = append(members, m)
				start = i + 1
			}
		}
		if depth < 0 {
			return nil, false
		}
	}
	return nil, false
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

// isBatch reports whether line is a JSON array (a batch) by its first
// byte that is not white space.
func isBatch(line []byte) bool {
	i := skipSpace(line, 0)
	return i < len(line) && line[i] == '['
}

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
