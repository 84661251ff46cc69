package oracleops

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"unicode/utf8"
)

// Descriptor bounds. They are oracleops' own (DESIGN.md section 8 names
// none): a descriptor crosses from an application to the host and on to an
// agent, so every part of it is bounded.
const (
	MaxTitleBytes       = 200
	MaxDescriptionBytes = 4096
	MaxSchemaBytes      = 16384
	MaxUnits            = 256
	MaxUnitBytes        = 32
	MaxSources          = 16
	MaxSourceBytes      = 512
	MaxExamples         = 16
	MaxExampleBytes     = 4096 // arguments and result of one example, each
	// MaxListReplyBytes bounds a whole discovery answer; it is the reply
	// frame bound of DESIGN.md section 8 less room for the envelope.
	MaxListReplyBytes = 1<<20 - 4096
)

// ParseListQuery parses the raw query of GET PREFIX/operations, the way an
// application reads it: parameters query, availability, limit and offset,
// each at most once, in any order, all optional (defaults filled in);
// anything else is refused.
func ParseListQuery(rawQuery string) (ListQuery, error) {
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return ListQuery{}, malformed("query string", "%v", err)
	}
	var q ListQuery
	for k, v := range vals {
		if len(v) != 1 {
			return ListQuery{}, malformed("query string", "parameter %s given %d times", strconv.Quote(trunc(k, 32)), len(v))
		}
		switch k {
		case "query":
			q.Query = v[0]
		case "availability":
			q.Availability = Availability(v[0])
			if q.Availability == "" {
				return ListQuery{}, malformed("availability", "empty")
			}
		case "limit":
			n, err := parseSmallUint("limit", v[0])
			if err != nil {
				return ListQuery{}, err
			}
			if err := ValidateLimit(n); err != nil {
				return ListQuery{}, err
			}
			q.Limit = n
		case "offset":
			n, err := parseSmallUint("offset", v[0])
			if err != nil {
				return ListQuery{}, err
			}
			q.Offset = n
		default:
			return ListQuery{}, malformed("query string", "unknown parameter %s", strconv.Quote(trunc(k, 32)))
		}
	}
	return q.normalized()
}

// parseSmallUint parses a decimal without sign or leading zeros; values
// past 9 digits are reported as past MaxOffset rather than parsed.
func parseSmallUint(field, s string) (int, error) {
	if s == "" {
		return 0, malformed(field, "empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, malformed(field, "%s is not a decimal number", strconv.Quote(trunc(s, 32)))
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, malformed(field, "%s has a leading zero", strconv.Quote(trunc(s, 32)))
	}
	if len(s) > 9 {
		return 0, outOfBounds(field, "%s exceeds the bound of %d", trunc(s, 32), MaxOffset)
	}
	n, _ := strconv.Atoi(s)
	return n, nil
}

// ParseInvokeBody decodes and validates an invocation body as an
// application receives it: at most MaxInvokeBody bytes, one JSON object
// with exactly the four members, no duplicate or unknown keys, ids within
// their bounds, arguments an object. The returned Arguments are canonical.
// Encode on the result gives the canonical body, whatever white space or
// key order the sender used.
func ParseInvokeBody(b []byte) (InvokeBody, error) {
	if err := ValidateInvokeSize(len(b), 0); err != nil {
		return InvokeBody{}, err
	}
	canon, err := CanonicalJSON(b)
	if err != nil {
		return InvokeBody{}, err
	}
	if canon[0] != '{' {
		return InvokeBody{}, malformed("invocation body", "must be a JSON object")
	}
	var body InvokeBody
	if err := jsonUnmarshalStrict("invocation body", canon, &body); err != nil {
		return InvokeBody{}, err
	}
	// Presence: a missing member decodes to its zero value, which the
	// checks below refuse (empty ids, absent arguments).
	if body.Arguments == nil || string(body.Arguments) == "null" {
		return InvokeBody{}, malformed("arguments", "missing; must be a JSON object")
	}
	if err := body.Validate(); err != nil {
		return InvokeBody{}, err
	}
	return body, nil
}

// DecodeDescriptor decodes and validates one descriptor as the host or the
// controller receives it from an application (GET PREFIX/operations/ID).
func DecodeDescriptor(b []byte) (Descriptor, error) {
	if len(b) > MaxListReplyBytes {
		return Descriptor{}, outOfBounds("descriptor", "%d bytes exceeds the bound of %d", len(b), MaxListReplyBytes)
	}
	canon, err := CanonicalJSON(b)
	if err != nil {
		return Descriptor{}, err
	}
	var d Descriptor
	if err := jsonUnmarshalStrict("descriptor", canon, &d); err != nil {
		return Descriptor{}, err
	}
	if err := ValidateDescriptor(d); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}

// DecodeListReply decodes and validates a discovery answer: at most
// MaxLimit descriptors, each valid, next_offset null or within
// 0..MaxOffset+MaxLimit, limits.request_bytes positive.
func DecodeListReply(b []byte) (ListReply, error) {
	if len(b) > MaxListReplyBytes {
		return ListReply{}, outOfBounds("list reply", "%d bytes exceeds the bound of %d", len(b), MaxListReplyBytes)
	}
	canon, err := CanonicalJSON(b)
	if err != nil {
		return ListReply{}, err
	}
	// Required members are checked by name first, since a missing member
	// and a null one decode alike.
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(canon, &shape); err != nil {
		return ListReply{}, malformed("list reply", "must be a JSON object")
	}
	for _, k := range []string{"operations", "next_offset", "limits"} {
		if _, ok := shape[k]; !ok {
			return ListReply{}, malformed("list reply", "missing member %s", strconv.Quote(k))
		}
	}
	var r ListReply
	if err := jsonUnmarshalStrict("list reply", canon, &r); err != nil {
		return ListReply{}, err
	}
	if len(r.Operations) > MaxLimit {
		return ListReply{}, outOfBounds("operations", "%d descriptors exceeds the bound of %d", len(r.Operations), MaxLimit)
	}
	for i, d := range r.Operations {
		if err := ValidateDescriptor(d); err != nil {
			return ListReply{}, malformed("operations", "descriptor %d: %v", i, err)
		}
	}
	if r.NextOffset != nil && (*r.NextOffset < 0 || *r.NextOffset > MaxOffset+MaxLimit) {
		return ListReply{}, outOfBounds("next_offset", "%d is outside 0..%d", *r.NextOffset, MaxOffset+MaxLimit)
	}
	if r.Limits.RequestBytes <= 0 {
		return ListReply{}, outOfBounds("limits.request_bytes", "%d is not positive", r.Limits.RequestBytes)
	}
	return r, nil
}

// ValidateDescriptor checks every field of a descriptor against its bound,
// compiles its input_schema (ValidateArguments's cache keeps it) and
// checks each example's arguments against it.
func ValidateDescriptor(d Descriptor) error {
	if err := ValidateOperationID(d.ID); err != nil {
		return err
	}
	if err := checkText("title", d.Title, 1, MaxTitleBytes); err != nil {
		return err
	}
	if err := checkText("description", d.Description, 0, MaxDescriptionBytes); err != nil {
		return err
	}
	if !d.Availability.Valid() {
		return malformed("availability", "%s is not one of live_direct, text_only, unavailable", strconv.Quote(trunc(string(d.Availability), 64)))
	}
	if len(d.InputSchema) > MaxSchemaBytes {
		return outOfBounds("input_schema", "%d bytes exceeds the bound of %d", len(d.InputSchema), MaxSchemaBytes)
	}
	schema, err := cachedSchema(d.InputSchema)
	if err != nil {
		return err
	}
	if len(d.Units) > MaxUnits {
		return outOfBounds("units", "%d entries exceeds the bound of %d", len(d.Units), MaxUnits)
	}
	for _, u := range d.Units {
		if err := checkText("units", u, 1, MaxUnitBytes); err != nil {
			return err
		}
	}
	if len(d.Sources) > MaxSources {
		return outOfBounds("sources", "%d entries exceeds the bound of %d", len(d.Sources), MaxSources)
	}
	for _, s := range d.Sources {
		if err := checkText("sources", s, 1, MaxSourceBytes); err != nil {
			return err
		}
	}
	if len(d.Examples) > MaxExamples {
		return outOfBounds("examples", "%d entries exceeds the bound of %d", len(d.Examples), MaxExamples)
	}
	for i, ex := range d.Examples {
		field := "examples[" + strconv.Itoa(i) + "]"
		if err := checkText(field+".title", ex.Title, 1, MaxTitleBytes); err != nil {
			return err
		}
		if len(ex.Arguments) > MaxExampleBytes || len(ex.Result) > MaxExampleBytes {
			return outOfBounds(field, "arguments or result exceeds the bound of %d bytes", MaxExampleBytes)
		}
		if r := bytes.TrimSpace(ex.Result); len(r) == 0 || string(r) == "null" {
			return malformed(field+".result", "missing")
		}
		if err := schema.Validate(ex.Arguments); err != nil {
			return malformed(field+".arguments", "%v", err)
		}
	}
	return nil
}

func checkText(field, s string, minLen, maxLen int) error {
	if len(s) < minLen {
		return outOfBounds(field, "empty")
	}
	if len(s) > maxLen {
		return outOfBounds(field, "%d bytes exceeds the bound of %d", len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return malformed(field, "not valid UTF-8")
	}
	return nil
}
