package mcpproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxBatchMembers bounds the messages in one JSON-RPC batch (a line that is
// a JSON array; DESIGN.md section 8). The MCP socket answers a batch it
// does not pass on once per request, about 200 bytes each: without the
// bound a line of 65,536 bytes ("[1,1,...]") would draw some 6 MB of
// answers. The proxy keeps the bound too, so that it never counts a call
// in a batch the socket answers with one error alone.
const MaxBatchMembers = 128

// IsBatch reports whether line is a JSON-RPC batch: its first byte that is
// not white space opens an array.
func IsBatch(line []byte) bool {
	i := skipSpace(line, 0)
	return i < len(line) && line[i] == '['
}

// CheckBatch reads a batch line (IsBatch) of at most MaxLine bytes as
// CheckLine reads a line, and returns its members' bytes for the caller's
// own checks of each, which count a member's nesting without the array's.
// It reports why the batch is not read on (ok false), with id null: not an
// array of JSON values (CodeParseError, JSON-RPC's answer to a batch that
// is not JSON), an empty array (CodeInvalidRequest, JSON-RPC's answer to
// "[]"), or more than MaxBatchMembers members. A member nested past
// MaxNesting is not checked as JSON here: its refusal, with its own id, is
// the member check's.
func CheckBatch(line []byte) (members [][]byte, code int, message string, ok bool) {
	members, split := splitBatch(line)
	switch {
	case !split:
		return nil, CodeParseError, "request line is not JSON", false
	case len(members) == 0:
		return nil, CodeInvalidRequest, "an empty batch is not a request; a batch holds one message or more", false
	case len(members) > MaxBatchMembers:
		return nil, CodeInvalidRequest, fmt.Sprintf("a batch of %d messages exceeds the bound of %d messages; nothing of it was run", len(members), MaxBatchMembers), false
	}
	for _, m := range members {
		var scan IDScan
		scan.Write(m)
		if scan.MaxDepth() <= MaxNesting && !json.Valid(m) {
			return nil, CodeParseError, "request line is not JSON", false
		}
	}
	return members, 0, "", true
}

// splitBatch cuts a JSON array into its members' bytes without decoding
// them; ok is false when line is not one array of comma-separated values
// followed by white space alone. Whether each member is JSON is left to
// CheckBatch.
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
