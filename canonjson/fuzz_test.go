package canonjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzCanonicalJSON: canonical output is valid JSON meaning the same as
// the input, and canonicalizing it again changes nothing.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"c":null}]}`, `"\u00e9\ud83d\ude00"`, `[1.0,-0,1E+2]`, `{}`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		if err != nil {
			return
		}
		if !json.Valid(in) || !json.Valid(out) {
			t.Fatalf("accepted %q -> %q; encoding/json says valid %v, %v", in, out, json.Valid(in), json.Valid(out))
		}
		again, err := CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		if !reflect.DeepEqual(decodeJSON(t, in), decodeJSON(t, out)) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
	})
}

func decodeJSON(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}
