package oracleops

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// CanonicalJSON returns the canonical encoding of the JSON text b: compact,
// object keys sorted at every level by the bytes of their UTF-8 encoding,
// numbers exactly as written, strings re-encoded with the fewest escapes
// (only '"', '\\' and the control characters below U+0020 are escaped; no
// HTML escaping, no \u escapes for other characters).
//
// It refuses, rather than repairs: invalid UTF-8, duplicate keys, a \u
// escape that is a lone surrogate, nesting deeper than MaxJSONDepth, and
// anything that is not exactly one JSON value with optional surrounding
// white space. The same value always gives the same bytes, which is what
// makes the SHA-256 of a request stable.
func CanonicalJSON(b []byte) ([]byte, error) {
	if !utf8.Valid(b) {
		return nil, malformed("json", "not valid UTF-8")
	}
	p := canonParser{in: b}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(b)), 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.fail("unexpected data after the value")
	}
	return out, nil
}

type canonParser struct {
	in  []byte
	pos int
}

func (p *canonParser) fail(reason string) error {
	return malformed("json", "%s at offset %d", reason, p.pos)
}

func (p *canonParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value appends the canonical encoding of the value at p.pos to out.
func (p *canonParser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail("unexpected end")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number(out)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	default:
		return nil, p.fail("unexpected character " + quoteByte(c))
	}
}

func (p *canonParser) literal(out []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return nil, p.fail("invalid literal")
	}
	p.pos += len(lit)
	return append(out, lit...), nil
}

// number copies a number as written, after checking it against the JSON
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *canonParser) number(out []byte) ([]byte, error) {
	start := p.pos
	in := p.in
	if p.pos < len(in) && in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(in) && in[p.pos] == '0':
		p.pos++
	case p.pos < len(in) && in[p.pos] >= '1' && in[p.pos] <= '9':
		p.digits()
	default:
		return nil, p.fail("invalid number")
	}
	if p.pos < len(in) && in[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	if p.pos < len(in) && (in[p.pos] == 'e' || in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(in) && (in[p.pos] == '+' || in[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	return append(out, in[start:p.pos]...), nil
}

func (p *canonParser) digits() int {
	n := 0
	for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

// str decodes the string at p.pos.
func (p *canonParser) str() (string, error) {
	p.pos++ // opening quote
	in := p.in
	// Fast path: no escapes.
	start := p.pos
	for p.pos < len(in) {
		c := in[p.pos]
		if c == '"' {
			s := string(in[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail("control character in string")
		}
		p.pos++
	}
	buf := append([]byte(nil), in[start:p.pos]...)
	for p.pos < len(in) {
		c := in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(in) {
			break
		}
		esc := in[p.pos+1]
		p.pos += 2
		switch esc {
		case '"', '\\', '/':
			buf = append(buf, esc)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by a \u low surrogate is a
				// character; anything else would be silently replaced by
				// U+FFFD in other decoders, so it is refused.
				if r >= 0xdc00 || p.pos+1 >= len(in) || in[p.pos] != '\\' || in[p.pos+1] != 'u' {
					return "", p.fail("lone surrogate in \\u escape")
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok {
					return "", p.fail("invalid \\u escape")
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", p.fail("lone surrogate in \\u escape")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail("invalid escape")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *canonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

func (p *canonParser) array(out []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, &FieldError{Field: "json", Reason: "nesting exceeds the bound of " + strconv.Itoa(MaxJSONDepth) + " levels at offset " + strconv.Itoa(p.pos), Err: ErrOutOfBounds}
	}
	p.pos++
	out = append(out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for {
		var err error
		p.skipSpace()
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			out = append(out, ',')
		case ']':
			p.pos++
			return append(out, ']'), nil
		default:
			return nil, p.fail("expected , or ]")
		}
	}
}

// member is one encoded "key":value span inside the output buffer.
type member struct {
	key        string
	keyAt      int // input offset of the key, for the duplicate error
	start, end int
}

func (p *canonParser) object(out []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, &FieldError{Field: "json", Reason: "nesting exceeds the bound of " + strconv.Itoa(MaxJSONDepth) + " levels at offset " + strconv.Itoa(p.pos), Err: ErrOutOfBounds}
	}
	p.pos++
	base := len(out)
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, '{', '}'), nil
	}
	var members []member
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.fail("expected a string key")
		}
		keyAt := p.pos
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.fail("expected :")
		}
		p.pos++
		p.skipSpace()
		m := member{key: key, keyAt: keyAt, start: len(out)}
		out = appendString(out, key)
		out = append(out, ':')
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		m.end = len(out)
		members = append(members, m)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return nil, p.fail("expected , or }")
		}
		p.pos++
		break
	}
	// Members were appended in input order; rewrite the span in key order.
	span := append([]byte(nil), out[base:]...)
	slices.SortFunc(members, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	for i := 1; i < len(members); i++ {
		if members[i].key == members[i-1].key {
			p.pos = max(members[i].keyAt, members[i-1].keyAt)
			return nil, p.fail("duplicate key " + strconv.Quote(trunc(members[i].key, 64)))
		}
	}
	out = append(out[:base], '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, span[m.start-base:m.end-base]...)
	}
	return append(out, '}'), nil
}

// appendString appends s as a JSON string with the fewest escapes.
func appendString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}
