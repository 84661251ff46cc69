package mcpproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxIDBytes bounds the JSON token of a request id that IDScan keeps (the
// quotes of a string included). An id longer than that is not echoed: the
// error that answers its line carries id null.
const MaxIDBytes = 128

// IDScan reads one JSON-RPC line given in pieces, as it is drained, and
// finds the value of its top-level "id" member without ever holding the
// line: it keeps a fixed state (the nesting depth, whether it is inside a
// string or an escape, the current top-level key, and at most MaxIDBytes of
// the id), whatever the line's length. It runs to the end of the line,
// since a client may put "id" last (the official TypeScript one does), and
// a repeated "id" counts as its last, as encoding/json has it.
//
// It does not check that the line is JSON: on a line that is not, the id it
// finds may be wrong, but ID only ever returns a JSON string or number
// token, so an error line that carries it is well formed. The line's
// bytes are another account's: FuzzIDScan holds IDScan to that.
//
// The zero IDScan is ready to read a line.
type IDScan struct {
	started  bool // the first non-space byte was read
	inObject bool // the line is a JSON object (its id is found)
	depth    int  // nesting of objects and arrays outside strings
	maxDepth int  // the deepest nesting read
	inString bool
	escape   bool // the byte before was a backslash inside a string

	// At depth 1 of the top-level object: whether a value is expected
	// (after a colon) rather than a key, the key being read, and whether
	// the key before the value is "id".
	wantValue bool
	inKey     bool
	key       [16]byte
	keyLen    int // past len(key): too long to be "id"
	keyIsID   bool

	// The value of an "id" member being read, and the last one found.
	inID     bool
	idString bool // the value being read is a string
	cur      [MaxIDBytes]byte
	curLen   int // past MaxIDBytes: too long to keep
	id       [MaxIDBytes]byte
	idLen    int
	idValid  bool
}

// Write reads the next piece of the line. It never fails.
func (s *IDScan) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		if s.inString && !s.escape && !s.inKey && !s.inID {
			// Most of a long line is inside strings that are neither a
			// key nor the id: skip to the next quote or backslash.
			j := stringRun(p[i:])
			if j < 0 {
				break
			}
			i += j
		}
		s.byte(p[i])
	}
	return len(p), nil
}

// stringRun is the index in b of the first quote or backslash, or -1.
func stringRun(b []byte) int {
	q := bytes.IndexByte(b, '"')
	if q < 0 {
		q = len(b)
	}
	if k := bytes.IndexByte(b[:q], '\\'); k >= 0 {
		return k
	}
	if q == len(b) {
		return -1
	}
	return q
}

// byte reads one byte of the line.
func (s *IDScan) byte(c byte) {
	if s.inString {
		s.stringByte(c)
		return
	}
	if s.inID && !s.idString {
		// A bare id token (a number, or true, false, null) runs to a
		// delimiter.
		if isDelimiter(c) || c == '{' || c == '[' || c == '"' || c == ':' {
			s.endID()
		} else {
			s.keepID(c)
			return
		}
	}
	if !s.started {
		if isSpace(c) {
			return
		}
		s.started = true
		s.inObject = c == '{'
	}
	switch c {
	case '"':
		s.inString = true
		if s.inObject && s.depth == 1 {
			if s.wantValue {
				if s.keyIsID {
					s.startID(true)
					s.keepID(c)
				}
			} else {
				s.inKey, s.keyLen = true, 0
			}
		}
	case '{', '[':
		if s.inObject && s.depth == 1 && s.wantValue && s.keyIsID {
			s.idValid = false // an id that is an object or array: none
		}
		s.depth++
		if s.depth > s.maxDepth {
			s.maxDepth = s.depth
		}
	case '}', ']':
		if s.depth > 0 {
			s.depth--
		}
	case ':':
		if s.inObject && s.depth == 1 {
			s.wantValue = true
		}
	case ',':
		if s.inObject && s.depth == 1 {
			s.wantValue, s.keyIsID = false, false
		}
	default:
		if s.inObject && s.depth == 1 && s.wantValue && s.keyIsID && !isSpace(c) {
			s.startID(false)
			s.keepID(c)
		}
	}
}

// stringByte reads one byte inside a string.
func (s *IDScan) stringByte(c byte) {
	end := false
	switch {
	case s.escape:
		s.escape = false
	case c == '\\':
		s.escape = true
	case c == '"':
		end = true
	}
	switch {
	case s.inKey:
		if end {
			s.inKey = false
			s.keyIsID = s.keyLen <= len(s.key) && keyIsID(s.key[:s.keyLen])
		} else {
			if s.keyLen < len(s.key) {
				s.key[s.keyLen] = c
			}
			s.keyLen++
		}
	case s.inID:
		s.keepID(c)
		if end {
			s.endID()
		}
	}
	if end {
		s.inString = false
	}
}

func (s *IDScan) startID(isString bool) {
	s.inID, s.idString, s.curLen = true, isString, 0
	// Whatever this value turns out to be, it replaces an earlier id.
	s.idValid = false
}

func (s *IDScan) keepID(c byte) {
	if s.curLen < len(s.cur) {
		s.cur[s.curLen] = c
	}
	s.curLen++
}

// endID ends the id value being read: it is kept if it fits and is a JSON
// string or number.
func (s *IDScan) endID() {
	s.inID = false
	if s.curLen > len(s.cur) {
		return
	}
	tok := s.cur[:s.curLen]
	if !idToken(tok, s.idString) {
		return
	}
	s.idLen = copy(s.id[:], tok)
	s.idValid = true
}

// ID is the top-level "id" of the line read so far as its JSON token (a
// string with its quotes, or a number), or nil when there is none that
// fits in MaxIDBytes: no id, an id null or of another type, a line that is
// not an object, or one cut short inside its id.
func (s *IDScan) ID() []byte {
	if !s.idValid {
		return nil
	}
	return s.id[:s.idLen]
}

// MaxDepth is the deepest nesting of objects and arrays read so far: 1 for
// a flat object.
func (s *IDScan) MaxDepth() int { return s.maxDepth }

// idToken reports whether tok is a JSON string or number. Only a token of
// at most MaxIDBytes is checked, so the check's cost is bounded.
func idToken(tok []byte, isString bool) bool {
	if len(tok) == 0 {
		return false
	}
	if isString != (tok[0] == '"') {
		return false
	}
	if !isString && tok[0] != '-' && (tok[0] < '0' || tok[0] > '9') {
		return false
	}
	return json.Valid(tok)
}

// keyIsID reports whether the raw bytes of a key (inside its quotes) spell
// "id", escapes decoded: \u0069\u0064 is "id" too.
func keyIsID(raw []byte) bool {
	var out [2]byte
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			if i+6 > len(raw) || raw[i+1] != 'u' {
				// Any escape but \u decodes to a byte that is neither 'i'
				// nor 'd' (and a short \u is not JSON).
				return false
			}
			v, ok := hex4(raw[i+2 : i+6])
			if !ok || v >= 0x80 {
				return false
			}
			c = byte(v)
			i += 5
		}
		if n >= len(out) {
			return false
		}
		out[n] = c
		n++
	}
	return n == 2 && out[0] == 'i' && out[1] == 'd'
}

// hex4 decodes four hex digits.
func hex4(b []byte) (rune, bool) {
	var v rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// MaxNesting bounds the nesting of objects and arrays in one request line,
// the message's own object counting as the first level (DESIGN.md section
// 8). encoding/json alone allows 10,000, and a line of 65,536 bytes can
// nest about 32,000 deep; no MCP request needs more than a few levels
// around its arguments, so 64 leaves an application's arguments 60.
const MaxNesting = 64

// CodeParseError is JSON-RPC's code for a line that is not JSON; its
// answer's id is null, since none can be read.
const CodeParseError = -32700

// CheckLine reads one request line of at most MaxLine bytes before it is
// passed on, and reports why it is not (ok false): a line that is not
// JSON (CodeParseError, id null), or one nested past MaxNesting
// (CodeInvalidRequest, with the line's id). A line of white space alone
// passes: the server skips it.
func CheckLine(line []byte) (code int, message string, id []byte, ok bool) {
	var scan IDScan
	scan.Write(line)
	if !scan.started {
		return 0, "", nil, true
	}
	if d := scan.MaxDepth(); d > MaxNesting {
		return CodeInvalidRequest, fmt.Sprintf("request nesting of %d levels exceeds the bound of %d levels of objects and arrays", d, MaxNesting), scan.ID(), false
	}
	if !json.Valid(line) {
		return CodeParseError, "request line is not JSON", nil, false
	}
	return 0, "", nil, true
}
