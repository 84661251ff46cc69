package oracleops

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/canonjson"
)

// CanonicalJSON returns the canonical encoding of the JSON text b, which
// package canonjson owns (canonjson.CanonicalJSON): compact, object keys sorted
// at every level by the bytes of their UTF-8 encoding, numbers exactly as
// written, strings re-encoded with the fewest escapes (only '"', '\\' and
// the control characters below U+0020 are escaped; no HTML escaping, no \u
// escapes for other characters).
//
// It refuses, rather than repairs: invalid UTF-8, duplicate keys, a \u
// escape that is a lone surrogate, and anything that is not exactly one
// JSON value with optional surrounding white space (ErrMalformed), and
// nesting deeper than MaxJSONDepth, this protocol's bound, tighter than
// canonjson's (ErrOutOfBounds). The first of these in the text is reported,
// with its byte offset. The same value always gives the same bytes, which
// is what makes the SHA-256 of a request stable.
func CanonicalJSON(b []byte) ([]byte, error) {
	deep := tooDeepAt(b, MaxJSONDepth)
	out, err := canonjson.CanonicalJSON(b)
	var je *canonjson.JSONError
	if err != nil && !errors.As(err, &je) {
		return nil, malformed("json", "%v", err)
	}
	if deep >= 0 && (err == nil || je.Offset > deep) {
		return nil, &FieldError{Field: "json", Reason: fmt.Sprintf("nesting exceeds the bound of %d levels at offset %d", MaxJSONDepth, deep), Err: ErrOutOfBounds}
	}
	if err != nil {
		return nil, malformed("json", "%s at offset %d", je.Reason, je.Offset)
	}
	return out, nil
}

// tooDeepAt returns the offset of the first '[' or '{' outside strings
// that opens a level deeper than limit, or -1. It does not check the
// grammar: CanonicalJSON reports whichever comes first, this or
// canonjson's refusal.
func tooDeepAt(b []byte, limit int) int {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return i
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return -1
}
