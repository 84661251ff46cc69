package oracleops

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalJSONExactBytes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":1,"a":{"d":[1,2,{"z":null,"y":true}],"c":"x"}}`, `{"a":{"c":"x","d":[1,2,{"y":true,"z":null}]},"b":1}`},
		{" {\n\t\"a\" : [ ] , \"b\" : { } }\r\n", `{"a":[],"b":{}}`},
		// Keys sort by UTF-8 bytes; non-ASCII and HTML characters stay raw,
		// U+2028 too.
		{`{"é":"\u00e9","z":"\u2028","e":"<&>"}`, "{\"e\":\"<&>\",\"z\":\"\u2028\",\"é\":\"é\"}"},
		// Numbers exactly as written.
		{`[1.50,-0,1E+3,12345678901234567890123,0.0e-0]`, `[1.50,-0,1E+3,12345678901234567890123,0.0e-0]`},
		// The fewest escapes.
		{`"\/\b\f\n\r\t\u0001\u001f\"\\\u0041"`, `"/\b\f\n\r\t\u0001\u001f\"\\A"`},
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
		{`"` + "\x7f" + `"`, "\"\x7f\""},
		{`true`, `true`},
		{`null`, `null`},
	} {
		got, err := CanonicalJSON([]byte(c.in))
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestCanonicalJSONRefusals(t *testing.T) {
	deep := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if _, err := CanonicalJSON([]byte(deep)); err != nil {
		t.Fatalf("depth %d (at the bound): %v", MaxJSONDepth, err)
	}
	for _, c := range []struct {
		in, want string
		sentinel error
	}{
		{"[" + deep + "]", "json: nesting exceeds the bound of 32 levels at offset 32", ErrOutOfBounds},
		{`{"a":1,"a":2}`, `json: duplicate key "a" at offset 7`, ErrMalformed},
		{`{"a":{"x":1},"b":2,"a":3}`, `json: duplicate key "a" at offset 19`, ErrMalformed},
		{`"\ud800"`, `json: lone surrogate \ud800 at offset 7`, ErrMalformed},
		{`"\udc00\ud800"`, `json: lone surrogate \udc00 at offset 7`, ErrMalformed},
		{`"\ud800\u0041"`, `json: invalid surrogate pair at offset 13`, ErrMalformed},
		{"\"\xff\"", "json: invalid UTF-8 in string at offset 1", ErrMalformed},
		{`01`, "json: unexpected '1' after the value at offset 1", ErrMalformed},
		{`1.`, "json: invalid number: digit expected after '.' at offset 2", ErrMalformed},
		{`-`, "json: invalid number at offset 1", ErrMalformed},
		{"\"a\nb\"", "json: unescaped control character 0x0a in string at offset 2", ErrMalformed},
		{``, "json: unexpected end of input at offset 0", ErrMalformed},
		{`{"a":1,}`, "json: object key expected at offset 7", ErrMalformed},
		{`[1 2]`, "json: unexpected '2' in array at offset 3", ErrMalformed},
		{`{"a" 1}`, "json: ':' expected after object key at offset 5", ErrMalformed},
		{`"\x"`, "json: invalid escape \\x at offset 3", ErrMalformed},
		{`nul`, "json: invalid literal, want null at offset 0", ErrMalformed},
		{`{} {}`, "json: unexpected '{' after the value at offset 3", ErrMalformed},
		{`'a'`, "json: unexpected '\\'' at offset 0", ErrMalformed},
	} {
		got, err := CanonicalJSON([]byte(c.in))
		if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// FuzzCanonicalJSON checks the canonicalizer against encoding/json: what
// it accepts is valid JSON with the same value, and canonical already;
// what valid JSON it refuses, it refuses for a reason of its own.
func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"b":[1,{"d":2,"c":"\u00e9"}],"a":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		if err != nil {
			if json.Valid(in) {
				msg := err.Error()
				if !strings.Contains(msg, "duplicate key") && !strings.Contains(msg, "lone surrogate") &&
					!strings.Contains(msg, "nesting exceeds") && !strings.Contains(msg, "invalid UTF-8") &&
					!strings.Contains(msg, "invalid surrogate pair") {
					t.Fatalf("valid JSON %q refused: %v", in, err)
				}
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%q gave invalid JSON %q", in, out)
		}
		again, err := CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		if !sameValue(t, in, out) {
			t.Fatalf("value changed: %q -> %q", in, out)
		}
	})
}

func sameValue(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(x []byte) any {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decode %q: %v", x, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}
