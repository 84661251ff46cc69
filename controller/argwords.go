package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// A tool's arguments are refused in steward's words: the field, what it
// must be and what it was, in the names of the tool's input schema. The
// decoder's own errors name Go types and struct fields (`json: cannot
// unmarshal number into Go struct field CallArgs.requestId of type
// string`), which mean nothing to an agent; none of them reaches one.

// argFields are the JSON names of the fields of the struct v points to,
// in their order: the names the tool's input schema declares.
func argFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// checkArgFields refuses a key of the canonical arguments object canon
// that is not a field of v, the first in sorted order. The decoder would
// match a key to a field whatever its case ("RequestID" for requestId) and
// take it silently: a key is refused unless it is the field's exact name.
func checkArgFields(canon []byte, v any) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(canon, &obj); err != nil {
		return decodeWords(err, canon)
	}
	fields := argFields(v)
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		var near string
		known := false
		for _, f := range fields {
			if k == f {
				known = true
				break
			}
			if strings.EqualFold(k, f) {
				near = f
			}
		}
		switch {
		case known:
		case near != "":
			return argErr("unknown field %q (did you mean %q?)", k, near)
		case len(fields) == 0:
			return argErr("unknown field %q: this tool takes no arguments", k)
		default:
			return argErr("unknown field %q (the fields are %s)", k, strings.Join(fields, ", "))
		}
	}
	return nil
}

// canonWords is a refusal of the arguments' JSON text by
// oracleops.CanonicalJSON, whose field is "json".
func canonWords(err error) error {
	var fe *oracleops.FieldError
	if errors.As(err, &fe) {
		return argErr("the tool's arguments are not valid JSON: %s", fe.Reason)
	}
	return argErr("the tool's arguments are not valid JSON")
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// wantOf says what a field of Go type t must be, in JSON's words.
func wantOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "a JSON object"
	}
}

// decodeWords is the decoder's refusal of the canonical arguments canon in
// steward's words. The decoder's Value names the JSON kind it met
// ("number", or "number 1.5" when a number did not fit the field), and
// Field the field by its JSON name.
func decodeWords(err error, canon []byte) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		// Unknown fields and the top level's kind are checked before the
		// decoder runs; what else it could refuse names no field.
		return argErr("the tool's arguments could not be read")
	}
	want := wantOf(te.Type)
	field := te.Field
	if field == "" {
		return argErr("the tool's arguments must be %s, not %s", want, jsonKind(canon))
	}
	if num, ok := strings.CutPrefix(te.Value, "number "); ok {
		return argErr("%s: %s", field, numberWords(num, want))
	}
	var got map[string]json.RawMessage
	if json.Unmarshal(canon, &got) == nil {
		if raw, ok := got[field]; ok {
			return argErr("%s: must be %s, not %s", field, want, jsonKind(raw))
		}
	}
	return argErr("%s: must be %s", field, want)
}

// numberWords says why the number num, as the agent wrote it, does not
// fit a field that must be want: the decoder reads an integer field only
// from digits, so 1.5, 1.0 and 1e3 are refused alike; digits alone that do
// not fit are past what the field holds (its own bounds are checked once
// it is read, and are the schema's). The number is shown cut to
// maxNumberShown bytes: the agent wrote it, and it may be long.
func numberWords(num, want string) string {
	shown := num
	if len(shown) > maxNumberShown {
		shown = shown[:maxNumberShown] + "..."
	}
	switch {
	case want != "an integer":
		return fmt.Sprintf("must be %s, not %s", want, shown)
	case strings.ContainsAny(num, ".eE"):
		return fmt.Sprintf("must be an integer written without a fraction or exponent, not %s", shown)
	case strings.HasPrefix(num, "-"):
		return fmt.Sprintf("%s is too small", shown)
	default:
		return fmt.Sprintf("%s is too large", shown)
	}
}

// maxNumberShown bounds the digits of a refused number a refusal repeats.
const maxNumberShown = 24

// checkJustification refuses a justification longer than
// msg.MaxJustification bytes or of more than one line: it is shown to a
// human or an advisor deciding the call's ask, one line of the agent's own
// words.
func checkJustification(j string) error {
	switch {
	case len(j) > msg.MaxJustification:
		return argErr("justification: %d bytes, at most %d", len(j), msg.MaxJustification)
	case msg.LineBreakAt(j) >= 0:
		return argErr("justification: must be one line, without line breaks")
	}
	return nil
}
