package oracleops

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The bounds of oracle-operations-v1 (DESIGN.md section 8). oracleops owns
// them: the controller checks them before journaling, the host before
// delivering, and the application again on receipt.
const (
	// MaxSearchBytes bounds the search text of a discovery, in UTF-8 bytes.
	MaxSearchBytes = 256
	// MinLimit and MaxLimit bound the page size of a discovery.
	MinLimit = 1
	MaxLimit = 50
	// DefaultLimit is the page size when a discovery names none.
	DefaultLimit = 10
	// MaxOffset bounds the offset of a discovery. It is not a protocol
	// bound of DESIGN.md; it keeps a parsed number far from overflow.
	MaxOffset = 1_000_000
	// MaxIDLen bounds request and conversation ids, in bytes.
	MaxIDLen = 80
	// MaxOperationIDLen bounds operation ids, in bytes.
	MaxOperationIDLen = 160
	// MaxInvokeBody bounds the encoded invocation body, in bytes.
	MaxInvokeBody = 65536
	// MaxPrefixLen bounds the API prefix of a route, in bytes.
	MaxPrefixLen = 128
	// MaxJSONDepth bounds the nesting of arrays and objects in any JSON
	// text oracleops canonicalizes or decodes.
	MaxJSONDepth = 32
)

// ErrOutOfBounds is wrapped by every error about a value past one of the
// bounds above.
var ErrOutOfBounds = errors.New("out of bounds")

// ErrMalformed is wrapped by every error about a value of the wrong shape:
// bad characters, bad JSON, unknown fields, wrong types.
var ErrMalformed = errors.New("malformed")

// FieldError names the field that failed a check and why, in one line.
// errors.Is(err, ErrOutOfBounds) or errors.Is(err, ErrMalformed) tells the
// two kinds apart.
type FieldError struct {
	Field  string // protocol name of the field, e.g. "requestId"
	Reason string // e.g. "81 bytes exceeds the bound of 80"
	Err    error  // ErrOutOfBounds or ErrMalformed
}

// Error returns "FIELD: REASON".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns the sentinel the error belongs to.
func (e *FieldError) Unwrap() error { return e.Err }

func outOfBounds(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrOutOfBounds}
}

func malformed(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrMalformed}
}

// ValidateRequestID checks a request id: 1 to MaxIDLen bytes of A-Za-z0-9_-.
func ValidateRequestID(id string) error { return validateID("requestId", id) }

// ValidateConversationID checks a conversation id: 1 to MaxIDLen bytes of
// A-Za-z0-9_-.
func ValidateConversationID(id string) error { return validateID("conversationId", id) }

func validateID(field, id string) error {
	if id == "" {
		return outOfBounds(field, "empty, must be 1 to %d bytes", MaxIDLen)
	}
	if len(id) > MaxIDLen {
		return outOfBounds(field, "%d bytes exceeds the bound of %d", len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '_' && c != '-' {
			return malformed(field, "byte %s at offset %d is not one of A-Za-z0-9_-", quoteByte(c), i)
		}
	}
	return nil
}

// ValidateOperationID checks an operation id: 1 to MaxOperationIDLen bytes
// of A-Za-z0-9._-, the first a letter or digit. Such an id needs no
// escaping in a URL path and can never be "." or "..".
func ValidateOperationID(id string) error {
	const field = "operationId"
	if id == "" {
		return outOfBounds(field, "empty, must be 1 to %d bytes", MaxOperationIDLen)
	}
	if len(id) > MaxOperationIDLen {
		return outOfBounds(field, "%d bytes exceeds the bound of %d", len(id), MaxOperationIDLen)
	}
	if !isAlnum(id[0]) {
		return malformed(field, "first byte %s is not a letter or digit", quoteByte(id[0]))
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return malformed(field, "byte %s at offset %d is not one of A-Za-z0-9._-", quoteByte(c), i)
		}
	}
	return nil
}

// ValidateQuery checks discovery search text: valid UTF-8, at most
// MaxSearchBytes bytes. The empty query matches every operation.
func ValidateQuery(q string) error {
	if len(q) > MaxSearchBytes {
		return outOfBounds("query", "%d bytes exceeds the bound of %d", len(q), MaxSearchBytes)
	}
	if !utf8.ValidString(q) {
		return malformed("query", "not valid UTF-8")
	}
	return nil
}

// ValidateLimit checks a discovery page size: MinLimit to MaxLimit.
// (A ListQuery with Limit 0 means DefaultLimit; this checks the limit sent.)
func ValidateLimit(n int) error {
	if n < MinLimit {
		return outOfBounds("limit", "%d is below the minimum of %d", n, MinLimit)
	}
	if n > MaxLimit {
		return outOfBounds("limit", "%d exceeds the bound of %d", n, MaxLimit)
	}
	return nil
}

// ValidateOffset checks a discovery offset: 0 to MaxOffset.
func ValidateOffset(n int) error {
	if n < 0 {
		return outOfBounds("offset", "%d is below the minimum of 0", n)
	}
	if n > MaxOffset {
		return outOfBounds("offset", "%d exceeds the bound of %d", n, MaxOffset)
	}
	return nil
}

// ValidateAvailabilityFilter checks the availability a discovery filters
// on: one of the three availabilities or AvailabilityAny.
func ValidateAvailabilityFilter(a Availability) error {
	if a == AvailabilityAny || a.Valid() {
		return nil
	}
	return malformed("availability", "%s is not one of live_direct, text_only, unavailable, any", strconv.Quote(trunc(string(a), 64)))
}

// ValidateInvokeSize checks the length of an encoded invocation body
// against MaxInvokeBody and, when requestBytes > 0, against the
// application's own limits.request_bytes, whichever is smaller.
func ValidateInvokeSize(n, requestBytes int) error {
	bound := MaxInvokeBody
	if requestBytes > 0 && requestBytes < bound {
		bound = requestBytes
	}
	if n > bound {
		return outOfBounds("invocation body", "%d bytes exceeds the bound of %d", n, bound)
	}
	return nil
}

// ValidatePrefix checks a route's API prefix: "" or "/" followed by
// segments of A-Za-z0-9._~- separated by "/", none of them empty, "." or
// "..", no trailing "/", at most MaxPrefixLen bytes. Such a prefix needs no
// escaping and cannot be re-resolved by a URL parser.
func ValidatePrefix(p string) error {
	const field = "prefix"
	if p == "" {
		return nil
	}
	if len(p) > MaxPrefixLen {
		return outOfBounds(field, "%d bytes exceeds the bound of %d", len(p), MaxPrefixLen)
	}
	if p[0] != '/' {
		return malformed(field, "must start with /")
	}
	seg := 0 // length of the current segment
	start := 1
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			s := p[start:i]
			if seg == 0 || s == "." || s == ".." {
				return malformed(field, "segment %s at offset %d is empty, . or ..", strconv.Quote(s), start)
			}
			seg, start = 0, i+1
			continue
		}
		if c := p[i]; !isAlnum(c) && c != '.' && c != '_' && c != '~' && c != '-' {
			return malformed(field, "byte %s at offset %d is not one of A-Za-z0-9._~-/", quoteByte(c), i)
		}
		seg++
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
}

// trunc shortens s to at most n bytes for an error message, on a rune
// boundary.
func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
