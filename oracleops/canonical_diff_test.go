package oracleops

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stewardrt/steward/canonjson"
)

// canonVectors is every canonical JSON input of the tests and fuzz seeds of
// this package and of package canonjson.
func canonVectors(t *testing.T) [][]byte {
	var vs [][]byte
	for _, s := range []string{
		`{"b":1,"a":{"d":[1,2,{"z":null,"y":true}],"c":"x"}}`, " {\n\t\"a\" : [ ] , \"b\" : { } }\r\n",
		`{"é":"\u00e9","z":"\u2028","e":"<&>"}`, `[1.50,-0,1E+3,12345678901234567890123,0.0e-0]`,
		`"\/\b\f\n\r\t\u0001\u001f\"\\\u0041"`, `"\ud83d\ude00"`, `"` + "\x7f" + `"`, `true`, `null`,
		`{"a":1,"a":2}`, `{"a":{"x":1},"b":2,"a":3}`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, "\"\xff\"",
		`01`, `1.`, `-`, "\"a\nb\"", ``, `{"a":1,}`, `[1 2]`, `{"a" 1}`, `"\x"`, `nul`, `{} {}`, `'a'`,
		` { "b" : 1 , "a" : { "d" : [ 1 , 2 , { "z" : true , "y" : null } ] , "c" : "x" } } `,
		`{"é":"\u00e9\u2028<>&","a":"\ud83d\ude00","Z":"\/"}`, `["\u0001\u001f\b\f\n\r\t\"\\", "\u007f"]`,
		`[1.0, -0, 1E+2, 0.5e-3, 12345678901234567890123, -1.50]`, `{}`, `"\u00E9\u00e9\u004A"`, ` [ ] `, `"s"`,
		`{"a":{},"":[]}`, "{\"\U00010000\":1,\"\uffff\":2}", `  `, `{"a":1,"\u0061":2}`, `{"x":{"k":1,"k":1}}`,
		"{\"a\":\"\xff\"}", "\"\xed\xa0\x80\"", `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `[1,]`, `1e`, `+1`,
		`{} x`, `1 2`, `"\u12"`, `{'a':1}`, `{a:1}`, `{"a":1`, `"abc`, `NaN`, `tru`, "\xef\xbb\xbf{}",
		strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth),
		strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1),
		strings.Repeat(`{"a":`, MaxJSONDepth) + "[]" + strings.Repeat("}", MaxJSONDepth),
		strings.Repeat("[", MaxJSONDepth+1) + "x",
		"[" + strings.Repeat(`"[",`, MaxJSONDepth+1) + "0]",
	} {
		vs = append(vs, []byte(s))
	}
	for _, dir := range []string{"testdata/fuzz/FuzzCanonicalJSON", "../canonjson/testdata/fuzz/FuzzCanonicalJSON"} {
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no seeds in %s: %v", dir, err)
		}
		for _, f := range files {
			vs = append(vs, readSeed(t, f))
		}
	}
	return vs
}

// readSeed reads a one-value []byte seed file in Go's corpus format.
func readSeed(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 3)
	if len(lines) < 2 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a corpus file", path)
	}
	arg := strings.TrimSpace(lines[1])
	if !strings.HasPrefix(arg, "[]byte(") || !strings.HasSuffix(arg, ")") {
		t.Fatalf("%s: not a []byte seed: %s", path, arg)
	}
	s, err := strconv.Unquote(arg[len("[]byte(") : len(arg)-1])
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// TestCanonicalJSONIsCanonjson: over every vector and seed of both
// packages, CanonicalJSON gives canonjson.CanonicalJSON's bytes, and refuses
// exactly what it refuses, plus what nests deeper than MaxJSONDepth. (Run
// against the two implementations this package and journal had before
// the format got one owner, over these and 870,000 fuzzed inputs, it found
// no difference.)
func TestCanonicalJSONIsCanonjson(t *testing.T) {
	for _, in := range canonVectors(t) {
		checkSameCanon(t, in)
	}
}

// FuzzCanonicalJSONIsCanonjson is the same comparison over fuzzed input.
func FuzzCanonicalJSONIsCanonjson(f *testing.F) {
	f.Add([]byte(`{"b":[1,{"d":2,"c":"\u00e9"}],"a":null}`))
	f.Fuzz(func(t *testing.T, in []byte) { checkSameCanon(t, in) })
}

func checkSameCanon(t *testing.T, in []byte) {
	t.Helper()
	got, err := CanonicalJSON(in)
	want, jerr := canonjson.CanonicalJSON(in)
	if deeper := jsonDepth(in) > MaxJSONDepth; deeper {
		if err == nil {
			t.Errorf("%q nests deeper than %d and was accepted", in, MaxJSONDepth)
		}
		return
	}
	if (err == nil) != (jerr == nil) || !bytes.Equal(got, want) {
		t.Errorf("%q:\n oracleops %q, %v\n canonjson %q, %v", in, got, err, want, jerr)
	}
}

// jsonDepth is the deepest nesting of brackets outside strings, however
// malformed the rest.
func jsonDepth(b []byte) int {
	depth, most, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			depth++
			most = max(most, depth)
		case !inStr && (c == ']' || c == '}'):
			depth--
		}
	}
	return most
}

// TestCanonicalJSONFirstRefusal: of a nesting past MaxJSONDepth and a
// grammar error, the one earlier in the text is reported.
func TestCanonicalJSONFirstRefusal(t *testing.T) {
	deep := strings.Repeat("[", MaxJSONDepth+1)
	for _, c := range []struct {
		in, want string
		sentinel error
	}{
		{deep + "x", "json: nesting exceeds the bound of 32 levels at offset 32", ErrOutOfBounds},
		{deep + strings.Repeat("]", MaxJSONDepth+1), "json: nesting exceeds the bound of 32 levels at offset 32", ErrOutOfBounds},
		{"[x" + deep, "json: unexpected 'x' at offset 1", ErrMalformed},
		{`[{"a":1,"a":2},` + deep, `json: duplicate key "a" at offset 8`, ErrMalformed},
		// Brackets inside strings, escaped quotes included, do not nest.
		{`["\"` + deep + `"]`, "", nil},
	} {
		_, err := CanonicalJSON([]byte(c.in))
		if c.sentinel == nil {
			if err != nil {
				t.Errorf("%q: %v", c.in, err)
			}
			continue
		}
		if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}
