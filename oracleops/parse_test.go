package oracleops

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseListQuery(t *testing.T) {
	q, err := ParseListQuery("")
	if err != nil || q != (ListQuery{Availability: AvailabilityLiveDirect, Limit: DefaultLimit}) {
		t.Fatalf("defaults: %+v, %v", q, err)
	}
	// What BuildList writes, ParseListQuery reads back.
	in := ListQuery{Query: "exact résumé+x&y=z", Availability: AvailabilityUnavailable, Limit: 50, Offset: 7}
	r, err := BuildList("/v1", in)
	if err != nil {
		t.Fatal(err)
	}
	q, err = ParseListQuery(r.Path[strings.IndexByte(r.Path, '?')+1:])
	if err != nil || q != in {
		t.Fatalf("round trip: %+v, %v; want %+v", q, err, in)
	}
	if q, err := ParseListQuery("query=" + strings.Repeat("%C3%A9", 128)); err != nil || len(q.Query) != 256 {
		t.Fatalf("query of 256 bytes: %v", err)
	}
	for raw, want := range map[string]string{
		"query=" + strings.Repeat("%C3%A9", 128) + "x": "query: 257 bytes exceeds the bound of 256",
		"limit=51":                 "limit: 51 exceeds the bound of 50",
		"limit=0":                  "limit: 0 is below the minimum of 1",
		"limit=-1":                 `limit: "-1" is not a decimal number`,
		"limit=07":                 `limit: "07" has a leading zero`,
		"limit=":                   "limit: empty",
		"offset=1000001":           "offset: 1000001 exceeds the bound of 1000000",
		"offset=99999999999999999": "offset: 99999999999999999 exceeds the bound of 1000000",
		"availability=":            "availability: empty",
		"availability=all":         `availability: "all" is not one of live_direct, text_only, unavailable, any`,
		"limit=1&limit=2":          `query string: parameter "limit" given 2 times`,
		"page=2":                   `query string: unknown parameter "page"`,
		"query=%ff":                "query: not valid UTF-8",
		"query=%zz":                `query string: invalid URL escape "%zz"`,
	} {
		if _, err := ParseListQuery(raw); err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", raw, err, want)
		}
	}
}

func TestParseInvokeBody(t *testing.T) {
	b, err := ParseInvokeBody([]byte(` {"requestId":"r1","operationId":"calc.evaluate","arguments":{"precision":3,"expression":"1/3"},"conversationId":"c1"} `))
	if err != nil {
		t.Fatal(err)
	}
	if b.RequestID != "r1" || b.ConversationID != "c1" || b.OperationID != "calc.evaluate" || string(b.Arguments) != `{"expression":"1/3","precision":3}` {
		t.Fatalf("decoded %+v", b)
	}
	enc, _ := b.Encode()
	if string(enc) != `{"arguments":{"expression":"1/3","precision":3},"conversationId":"c1","operationId":"calc.evaluate","requestId":"r1"}` {
		t.Fatalf("canonical %s", enc)
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct{ in, want string }{
		{`{"arguments":{},"conversationId":"c","operationId":"o","requestId":"` + long(81) + `"}`, "requestId: 81 bytes exceeds the bound of 80"},
		{`{"arguments":{},"conversationId":"` + long(81) + `","operationId":"o","requestId":"r"}`, "conversationId: 81 bytes exceeds the bound of 80"},
		{`{"arguments":{},"conversationId":"c","operationId":"` + long(161) + `","requestId":"r"}`, "operationId: 161 bytes exceeds the bound of 160"},
		{`{"arguments":{},"conversationId":"c","operationId":"o"}`, "requestId: empty, must be 1 to 80 bytes"},
		{`{"conversationId":"c","operationId":"o","requestId":"r"}`, "arguments: missing; must be a JSON object"},
		{`{"arguments":null,"conversationId":"c","operationId":"o","requestId":"r"}`, "arguments: missing; must be a JSON object"},
		{`{"arguments":"x","conversationId":"c","operationId":"o","requestId":"r"}`, "arguments: must be a JSON object"},
		{`{"arguments":{},"conversationId":"c","operationId":"o","requestId":"r","extra":1}`, `invocation body: json: unknown field "extra"`},
		{`{"arguments":{},"conversationId":"c","operationId":"o","requestId":7}`, "invocation body: json: cannot unmarshal number into Go struct field InvokeBody.requestId of type string"},
		{`{"arguments":{},"arguments":{},"conversationId":"c","operationId":"o","requestId":"r"}`, `json: duplicate key "arguments" at offset 16`},
		{`[]`, "invocation body: must be a JSON object"},
		{`{"arguments":{}`, "json: unterminated object at offset 15"},
	} {
		if _, err := ParseInvokeBody([]byte(c.in)); err == nil || err.Error() != c.want {
			t.Errorf("%.60q: got %v, want %q", c.in, err, c.want)
		}
	}
	// The size bound is checked before anything is decoded.
	big := make([]byte, MaxInvokeBody+1)
	if _, err := ParseInvokeBody(big); err == nil || err.Error() != "invocation body: 65537 bytes exceeds the bound of 65536" {
		t.Errorf("one past: %v", err)
	}
	at, _ := bodyOfSize(t, MaxInvokeBody).Encode()
	if b, err := ParseInvokeBody(at); err != nil || b.OperationID != "text.sha256" {
		t.Errorf("at the bound: %v", err)
	}
}

var testDescriptor = Descriptor{
	ID: "calc.evaluate", Title: "Evaluate", Description: "Exact arithmetic.",
	Availability: AvailabilityLiveDirect,
	InputSchema:  json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string","maxLength":10}},"required":["expression"],"additionalProperties":false}`),
	Units:        []string{"1"}, Sources: []string{"math/big"},
	Examples: []Example{{Title: "one", Arguments: json.RawMessage(`{"expression":"1+1"}`), Result: json.RawMessage(`{"fraction":"2"}`)}},
}

func TestDescriptorDecode(t *testing.T) {
	enc, _ := json.Marshal(testDescriptor)
	d, err := DecodeDescriptor(enc)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != testDescriptor.ID || len(d.Examples) != 1 {
		t.Fatalf("decoded %+v", d)
	}
	mutate := func(f func(*Descriptor)) []byte {
		d := testDescriptor
		f(&d)
		b, _ := json.Marshal(d)
		return b
	}
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"unknown field", []byte(strings.Replace(string(enc), `"id"`, `"extra":1,"id"`, 1)), `descriptor: json: unknown field "extra"`},
		{"bad availability", mutate(func(d *Descriptor) { d.Availability = "sometimes" }), `availability: "sometimes" is not one of live_direct, text_only, unavailable`},
		{"any is not an availability", mutate(func(d *Descriptor) { d.Availability = AvailabilityAny }), `availability: "any" is not one of live_direct, text_only, unavailable`},
		{"no title", mutate(func(d *Descriptor) { d.Title = "" }), "title: empty"},
		{"long title", mutate(func(d *Descriptor) { d.Title = strings.Repeat("t", MaxTitleBytes+1) }), "title: 201 bytes exceeds the bound of 200"},
		{"long description", mutate(func(d *Descriptor) { d.Description = strings.Repeat("d", MaxDescriptionBytes+1) }), "description: 4097 bytes exceeds the bound of 4096"},
		{"schema not an object", mutate(func(d *Descriptor) { d.InputSchema = json.RawMessage(`true`) }), "input_schema: must be a JSON object"},
		{"example fails schema", mutate(func(d *Descriptor) {
			d.Examples = []Example{{Title: "x", Arguments: json.RawMessage(`{"expression":"12345678901"}`), Result: json.RawMessage(`{}`)}}
		}), "examples[0].arguments: arguments do not match the input schema: at '/expression': maxLength: got 11, want 10"},
		{"example without result", mutate(func(d *Descriptor) {
			d.Examples = []Example{{Title: "x", Arguments: json.RawMessage(`{"expression":"1"}`)}}
		}), "examples[0].result: missing"},
		{"too many units", mutate(func(d *Descriptor) { d.Units = make([]string, MaxUnits+1) }), "units: 257 entries exceeds the bound of 256"},
		{"long unit", mutate(func(d *Descriptor) { d.Units = []string{strings.Repeat("u", MaxUnitBytes+1)} }), "units: 33 bytes exceeds the bound of 32"},
		{"bad id", mutate(func(d *Descriptor) { d.ID = "_x" }), "operationId: first byte '_' is not a letter or digit"},
	} {
		if _, err := DecodeDescriptor(c.in); err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestListReplyDecode(t *testing.T) {
	d, _ := json.Marshal(testDescriptor)
	r, err := DecodeListReply([]byte(`{"operations":[` + string(d) + `],"next_offset":null,"limits":{"request_bytes":65536}}`))
	if err != nil || len(r.Operations) != 1 || r.NextOffset != nil || r.Limits.RequestBytes != 65536 {
		t.Fatalf("%+v, %v", r, err)
	}
	r, err = DecodeListReply([]byte(`{"operations":[],"next_offset":5,"limits":{"request_bytes":1}}`))
	if err != nil || r.NextOffset == nil || *r.NextOffset != 5 {
		t.Fatalf("%+v, %v", r, err)
	}
	ops := func(n int) string { return strings.TrimSuffix(strings.Repeat(string(d)+",", n), ",") }
	if _, err := DecodeListReply([]byte(`{"operations":[` + ops(MaxLimit) + `],"next_offset":null,"limits":{"request_bytes":1}}`)); err != nil {
		t.Fatalf("%d operations: %v", MaxLimit, err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"operations":[` + ops(MaxLimit+1) + `],"next_offset":null,"limits":{"request_bytes":1}}`, "operations: 51 descriptors exceeds the bound of 50"},
		{`{"operations":[],"limits":{"request_bytes":1}}`, `list reply: missing member "next_offset"`},
		{`{"operations":[],"next_offset":-1,"limits":{"request_bytes":1}}`, "next_offset: -1 is outside 0..1000050"},
		{`{"operations":[],"next_offset":null,"limits":{"request_bytes":0}}`, "limits.request_bytes: 0 is not positive"},
		{`{"operations":[],"next_offset":null,"limits":{"request_bytes":1,"x":2}}`, `list reply: json: unknown field "x"`},
		{`{"operations":[{"id":"a"}],"next_offset":null,"limits":{"request_bytes":1}}`, "operations: descriptor 0: title: empty"},
		{`[]`, "list reply: must be a JSON object"},
	} {
		_, err := DecodeListReply([]byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("%.80q: got %v, want %q", c.in, err, c.want)
		}
	}
}

func TestValidateArguments(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5},"s":{"type":"string","format":"date-time"}},"required":["n"],"additionalProperties":false}`)
	if err := ValidateArguments(schema, []byte(`{"n":5,"s":"2024-02-29T12:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	err := ValidateArguments(schema, []byte(`{"n":6,"s":"yesterday","x":1}`))
	var ae *ArgumentsError
	if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("got %v", err)
	}
	locs := map[string]string{}
	for _, v := range ae.Violations {
		locs[v.InstanceLocation] = v.KeywordLocation
	}
	if locs["/n"] != "/properties/n/maximum" || locs["/s"] != "/properties/s/format" || locs[""] != "/additionalProperties" {
		t.Fatalf("violations %+v", ae.Violations)
	}
	if err := ValidateArguments(schema, []byte(`{}`)); err == nil || err.Error() != "arguments do not match the input schema: at (root): missing property 'n'" {
		t.Fatalf("missing: %v", err)
	}
	if err := ValidateArguments(schema, []byte(`{"n":1,"n":2}`)); err == nil || err.Error() != `arguments: json: duplicate key "n" at offset 7` {
		t.Fatalf("duplicate: %v", err)
	}
}

// TestSchemaLoadsNothing checks that a $ref in an application's schema
// never makes the reader open a file.
func TestSchemaLoadsNothing(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "/etc/passwd", "https://example.com/s.json"} {
		_, err := CompileSchema([]byte(`{"$ref":"` + ref + `"}`))
		if err == nil || !strings.Contains(err.Error(), "external schema references are not allowed") {
			t.Errorf("%s: %v", ref, err)
		}
	}
	if _, err := CompileSchema([]byte(`{"type":"object","$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`)); err != nil {
		t.Errorf("internal $ref: %v", err)
	}
	if _, err := CompileSchema([]byte(`{"type":"nonsense"}`)); err == nil {
		t.Error("an invalid schema compiled")
	}
	if _, err := CompileSchema([]byte(`{"x":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`)); err == nil || err.Error() != "input_schema: 16392 bytes exceeds the bound of 16384" {
		t.Errorf("large schema: %v", err)
	}
}

func TestArgumentsErrorCaps(t *testing.T) {
	props := make([]string, 40)
	args := make([]string, 40)
	for i := range props {
		props[i] = `"p` + itoa(i) + `":{"type":"string"}`
		args[i] = `"p` + itoa(i) + `":1`
	}
	schema := `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	err := ValidateArguments([]byte(schema), []byte(`{`+strings.Join(args, ",")+`}`))
	var ae *ArgumentsError
	if !errors.As(err, &ae) || len(ae.Violations) != MaxViolations || ae.Omitted != 40-MaxViolations {
		t.Fatalf("got %v", err)
	}
	if len(err.Error()) > maxErrorText+32 || !strings.HasSuffix(err.Error(), " more") {
		t.Fatalf("error text %d bytes: %s", len(err.Error()), err)
	}
}

func FuzzParseInvokeBody(f *testing.F) {
	f.Add([]byte(`{"arguments":{"expression":"1+1"},"conversationId":"c","operationId":"calc.evaluate","requestId":"r"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := ParseInvokeBody(in)
		if err != nil {
			return
		}
		enc, err := b.Encode()
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", in, err)
		}
		again, err := ParseInvokeBody(enc)
		if err != nil {
			t.Fatalf("canonical %q refused: %v", enc, err)
		}
		enc2, _ := again.Encode()
		if string(enc2) != string(enc) {
			t.Fatalf("not stable: %q then %q", enc, enc2)
		}
	})
}

func FuzzParseListQuery(f *testing.F) {
	f.Add("query=a%20b&availability=any&limit=5&offset=10")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := ParseListQuery(raw)
		if err != nil {
			return
		}
		r, err := BuildList("", q)
		if err != nil {
			t.Fatalf("accepted %q as %+v but cannot build it: %v", raw, q, err)
		}
		q2, err := ParseListQuery(r.Path[strings.IndexByte(r.Path, '?')+1:])
		if err != nil || q2 != q {
			t.Fatalf("round trip %+v -> %s -> %+v, %v", q, r.Path, q2, err)
		}
	})
}

func FuzzDecodeListReply(f *testing.F) {
	d, _ := json.Marshal(testDescriptor)
	f.Add([]byte(`{"operations":[` + string(d) + `],"next_offset":1,"limits":{"request_bytes":65536}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := DecodeListReply(in)
		if err != nil {
			return
		}
		if len(r.Operations) > MaxLimit || r.Limits.RequestBytes <= 0 {
			t.Fatalf("accepted out of bounds: %+v", r)
		}
		for _, d := range r.Operations {
			if err := ValidateDescriptor(d); err != nil {
				t.Fatalf("accepted an invalid descriptor: %v", err)
			}
		}
	})
}

func FuzzDecodeDescriptor(f *testing.F) {
	d, _ := json.Marshal(testDescriptor)
	f.Add(d)
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := DecodeDescriptor(in)
		if err != nil {
			return
		}
		if err := ValidateOperationID(d.ID); err != nil || !d.Availability.Valid() {
			t.Fatalf("accepted %+v", d)
		}
	})
}
