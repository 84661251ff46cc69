package canonjson

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func TestCanonicalJSONExact(t *testing.T) {
	cases := []struct{ in, want string }{
		{` { "b" : 1 , "a" : { "d" : [ 1 , 2 , { "z" : true , "y" : null } ] , "c" : "x" } } `,
			`{"a":{"c":"x","d":[1,2,{"y":null,"z":true}]},"b":1}`},
		// Non-ASCII is written as UTF-8, escapes are decoded, U+2028 and
		// HTML characters stay as they are; keys sort by UTF-8 bytes.
		{`{"é":"\u00e9\u2028<>&","a":"\ud83d\ude00","Z":"\/"}`,
			"{\"Z\":\"/\",\"a\":\"\U0001F600\",\"é\":\"é\u2028<>&\"}"},
		// Only the required escapes remain.
		{`["\u0001\u001f\b\f\n\r\t\"\\", "\u007f"]`, "[\"\\u0001\\u001f\\b\\f\\n\\r\\t\\\"\\\\\",\"\x7f\"]"},
		// Numbers are kept exactly as written.
		{`[1.0, -0, 1E+2, 0.5e-3, 12345678901234567890123, -1.50]`, `[1.0,-0,1E+2,0.5e-3,12345678901234567890123,-1.50]`},
		{`{}`, `{}`},
		{`"\u00E9\u00e9\u004A"`, `"ééJ"`},
		{` [ ] `, `[]`},
		{`"s"`, `"s"`},
		{`{"a":{},"":[]}`, `{"":[],"a":{}}`},
		// U+FFFF sorts before U+10000 in UTF-8 byte order.
		{"{\"\U00010000\":1,\"\uffff\":2}", "{\"\uffff\":2,\"\U00010000\":1}"},
	}
	for _, c := range cases {
		got, err := CanonicalJSON([]byte(c.in))
		if err != nil {
			t.Errorf("CanonicalJSON(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("CanonicalJSON(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
		again, err := CanonicalJSON(got)
		if err != nil || string(again) != string(got) {
			t.Errorf("not idempotent: %s -> %s (%v)", got, again, err)
		}
	}
}

func TestCanonicalJSONRefuses(t *testing.T) {
	cases := map[string]string{
		"empty":               ``,
		"only space":          `  `,
		"duplicate key":       `{"a":1,"a":2}`,
		"duplicate escaped":   `{"a":1,"\u0061":2}`,
		"nested duplicate":    `{"x":{"k":1,"k":1}}`,
		"invalid utf-8":       "{\"a\":\"\xff\"}",
		"utf-8 surrogate":     "\"\xed\xa0\x80\"",
		"lone high surrogate": `"\ud83d"`,
		"lone low surrogate":  `"\ude00"`,
		"bad pair":            `"\ud83d\u0041"`,
		"trailing comma":      `[1,]`,
		"trailing comma obj":  `{"a":1,}`,
		"leading zero":        `01`,
		"bare minus":          `-`,
		"dot no digit":        `1.`,
		"exp no digit":        `1e`,
		"plus sign":           `+1`,
		"trailing garbage":    `{} x`,
		"two values":          `1 2`,
		"control in string":   "\"a\nb\"",
		"bad escape":          `"\x"`,
		"short unicode":       `"\u12"`,
		"single quotes":       `{'a':1}`,
		"unquoted key":        `{a:1}`,
		"missing colon":       `{"a" 1}`,
		"unterminated":        `{"a":1`,
		"unterminated string": `"abc`,
		"nan":                 `NaN`,
		"true prefix":         `tru`,
		"bom":                 "\xef\xbb\xbf{}",
	}
	for name, in := range cases {
		got, err := CanonicalJSON([]byte(in))
		if err == nil || !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%s: CanonicalJSON(%q) = %q, %v; want ErrInvalidJSON", name, in, got, err)
		}
	}
}

func TestCanonicalJSONDepth(t *testing.T) {
	at := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if _, err := CanonicalJSON([]byte(at)); err != nil {
		t.Fatalf("depth %d refused: %v", MaxJSONDepth, err)
	}
	over := strings.Repeat(`{"a":`, MaxJSONDepth) + "[]" + strings.Repeat("}", MaxJSONDepth)
	_, err := CanonicalJSON([]byte(over))
	if !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), "nesting deeper than 64") {
		t.Fatalf("depth %d: %v, want the nesting refusal", MaxJSONDepth+1, err)
	}
}

// TestSum256: the sum is of the canonical form, so texts that differ only
// in spelling sum alike; what CanonicalJSON refuses, Sum256 refuses.
func TestSum256(t *testing.T) {
	a, err := Sum256([]byte(`{ "b":1, "a":2 }`))
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256([]byte(`{"a":2,"b":1}`)); a != want {
		t.Fatalf("Sum256 = %x, want %x", a, want)
	}
	for _, in := range [][]byte{nil, []byte(`{`), []byte(`{"a":1,"a":1}`)} {
		if s, err := Sum256(in); !errors.Is(err, ErrInvalidJSON) || s != [32]byte{} {
			t.Errorf("Sum256(%q) = %x, %v; want ErrInvalidJSON", in, s, err)
		}
	}
}

// TestCanonicalJSONErrorOffset: a refusal is a *JSONError naming the first
// thing wrong and its byte offset, and wraps ErrInvalidJSON.
func TestCanonicalJSONErrorOffset(t *testing.T) {
	for _, c := range []struct {
		in     string
		offset int
		reason string
	}{
		{`{"a":1,"a":2}`, 7, `duplicate key "a"`},
		{`[1 2]`, 3, `unexpected '2' in array`},
		{`"\ud800"`, 7, `lone surrogate \ud800`},
		{``, 0, `unexpected end of input`},
	} {
		_, err := CanonicalJSON([]byte(c.in))
		var je *JSONError
		if !errors.As(err, &je) || je.Offset != c.offset || je.Reason != c.reason || !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%q: %#v (%v), want offset %d reason %q", c.in, je, err, c.offset, c.reason)
		}
	}
}
