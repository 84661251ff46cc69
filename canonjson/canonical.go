package canonjson

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth bounds the nesting of arrays and objects CanonicalJSON accepts.
const MaxJSONDepth = 64

// CanonicalJSON returns the canonical form of a JSON text: compact (no
// insignificant whitespace), object members sorted by the bytes of their
// UTF-8 keys at every level, strings written as UTF-8 with only the escapes
// JSON requires (\" \\ and control characters: \b \f \n \r \t, else \u00xx;
// no \u escapes for non-ASCII, no HTML escaping), and numbers kept exactly as
// written. It refuses invalid JSON (RFC 8259 grammar, invalid UTF-8, lone
// surrogates), duplicate keys (compared after unescaping) and nesting deeper
// than MaxJSONDepth with a *JSONError, which wraps ErrInvalidJSON.
//
// Keys sort by UTF-8 bytes, which is Unicode code point order; RFC 8785
// sorts by UTF-16 code units instead, which differs only for keys with
// characters above U+FFFF against U+E000-U+FFFF.
func CanonicalJSON(b []byte) ([]byte, error) {
	p := canonParser{in: b}
	p.ws()
	out, err := p.value(nil, 0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.in) {
		return nil, p.errorf("unexpected %q after the value", p.in[p.pos])
	}
	return out, nil
}

// Sum256 returns the SHA-256 of the canonical form of the JSON text b, and
// refuses what CanonicalJSON refuses. Two texts with the same meaning (up to
// white space, member order and string escapes) have the same sum: it is
// the binding of a config to the journal that records it, which a config
// file reformatted by hand must keep.
func Sum256(b []byte) ([32]byte, error) {
	c, err := CanonicalJSON(b)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(c), nil
}

type canonParser struct {
	in  []byte
	pos int
}

// ErrInvalidJSON is matched (errors.Is) by every refusal of CanonicalJSON
// and Sum256: input that is not valid JSON, has duplicate keys or nests
// deeper than MaxJSONDepth.
var ErrInvalidJSON = errors.New("canonjson: invalid JSON")

// JSONError is why CanonicalJSON refused its input: the first thing wrong
// and the byte offset where it was found. It wraps ErrInvalidJSON.
type JSONError struct {
	Offset int    // byte offset in the input
	Reason string // e.g. `duplicate key "a"`
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("canonjson: JSON at byte %d: %s: %v", e.Offset, e.Reason, ErrInvalidJSON)
}

// Unwrap returns ErrInvalidJSON.
func (e *JSONError) Unwrap() error { return ErrInvalidJSON }

func (p *canonParser) errorf(format string, args ...any) error {
	return &JSONError{Offset: p.pos, Reason: fmt.Sprintf(format, args...)}
}

func (p *canonParser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one value at p.pos and appends its canonical form to out.
func (p *canonParser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.errorf("unexpected end of input")
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
		return AppendCanonicalString(out, s), nil
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	default:
		return nil, p.errorf("unexpected %q", c)
	}
}

func (p *canonParser) literal(out []byte, lit string) ([]byte, error) {
	if len(p.in)-p.pos < len(lit) || string(p.in[p.pos:p.pos+len(lit)]) != lit {
		return nil, p.errorf("invalid literal, want %s", lit)
	}
	p.pos += len(lit)
	return append(out, lit...), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number checks the RFC 8259 number grammar and copies the number as written.
func (p *canonParser) number(out []byte) ([]byte, error) {
	start := p.pos
	in := p.in
	if in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(in) && in[p.pos] == '0':
		p.pos++
	case p.pos < len(in) && in[p.pos] >= '1' && in[p.pos] <= '9':
		for p.pos < len(in) && isDigit(in[p.pos]) {
			p.pos++
		}
	default:
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(in) && in[p.pos] == '.' {
		p.pos++
		if p.pos >= len(in) || !isDigit(in[p.pos]) {
			return nil, p.errorf("invalid number: digit expected after '.'")
		}
		for p.pos < len(in) && isDigit(in[p.pos]) {
			p.pos++
		}
	}
	if p.pos < len(in) && (in[p.pos] == 'e' || in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(in) && (in[p.pos] == '+' || in[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(in) || !isDigit(in[p.pos]) {
			return nil, p.errorf("invalid number: digit expected in exponent")
		}
		for p.pos < len(in) && isDigit(in[p.pos]) {
			p.pos++
		}
	}
	return append(out, in[start:p.pos]...), nil
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10), true
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

func (p *canonParser) hex4() (rune, error) {
	if len(p.in)-p.pos < 4 {
		return 0, p.errorf("incomplete \\u escape")
	}
	var r rune
	for i := 0; i < 4; i++ {
		v, ok := hexVal(p.in[p.pos+i])
		if !ok {
			return 0, p.errorf("invalid \\u escape")
		}
		r = r<<4 | v
	}
	p.pos += 4
	return r, nil
}

// str parses a string at p.pos (on the opening quote) and returns it unescaped.
func (p *canonParser) str() (string, error) {
	p.pos++ // opening quote
	var buf []byte
	for {
		if p.pos >= len(p.in) {
			return "", p.errorf("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c == '\\':
			p.pos++
			if p.pos >= len(p.in) {
				return "", p.errorf("unterminated escape")
			}
			e := p.in[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
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
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xdc00 || len(p.in)-p.pos < 2 || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
						return "", p.errorf("lone surrogate \\u%04x", r)
					}
					p.pos += 2
					lo, err := p.hex4()
					if err != nil {
						return "", err
					}
					r = utf16.DecodeRune(r, lo)
					if r == utf8.RuneError {
						return "", p.errorf("invalid surrogate pair")
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", p.errorf("invalid escape \\%c", e)
			}
		case c < 0x20:
			return "", p.errorf("unescaped control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8 in string")
			}
			buf = append(buf, p.in[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

const hexDigits = "0123456789abcdef"

// AppendCanonicalString appends s as CanonicalJSON writes a string: quoted,
// with only the escapes JSON requires. s is copied byte for byte otherwise,
// so it must be valid UTF-8 for the result to be valid JSON.
func AppendCanonicalString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			out = append(out, '\\', '"')
		case c == '\\':
			out = append(out, '\\', '\\')
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

func (p *canonParser) array(out []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, p.errorf("nesting deeper than %d", MaxJSONDepth)
	}
	p.pos++ // [
	out = append(out, '[')
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for {
		p.ws()
		var err error
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unterminated array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			out = append(out, ',')
		case ']':
			p.pos++
			return append(out, ']'), nil
		default:
			return nil, p.errorf("unexpected %q in array", p.in[p.pos])
		}
	}
}

type canonMember struct {
	key   string
	value []byte
}

func (p *canonParser) object(out []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, p.errorf("nesting deeper than %d", MaxJSONDepth)
	}
	p.pos++ // {
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, '{', '}'), nil
	}
	var members []canonMember
	seen := make(map[string]struct{})
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.errorf("object key expected")
		}
		keyAt := p.pos
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := seen[key]; dup {
			p.pos = keyAt
			return nil, p.errorf("duplicate key %q", key)
		}
		seen[key] = struct{}{}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.errorf("':' expected after object key")
		}
		p.pos++
		p.ws()
		v, err := p.value(nil, depth)
		if err != nil {
			return nil, err
		}
		members = append(members, canonMember{key, v})
		p.ws()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unterminated object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return nil, p.errorf("unexpected %q in object", p.in[p.pos])
		}
		p.pos++
		break
	}
	sort.Slice(members, func(i, k int) bool { return members[i].key < members[k].key })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = AppendCanonicalString(out, m.key)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}
