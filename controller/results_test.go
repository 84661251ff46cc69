package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stewardrt/steward/wire/msg"
)

// compiledOutput holds each tool's output schema compiled under JSON
// Schema draft-07 (the official TypeScript SDK client's default validator,
// Ajv) and 2020-12 (go-sdk's jsonschema): a result a client accepts must
// pass both.
var compiledOutput = sync.OnceValues(func() (map[string][]*jsonschema.Schema, error) {
	out := map[string][]*jsonschema.Schema{}
	for tool, schema := range map[string]map[string]any{
		ToolOverview: overviewOutputSchema(), ToolDiscover: discoverOutputSchema(), ToolCall: callOutputSchema(),
		ToolAsks: asksOutputSchema(), ToolAdvise: adviseOutputSchema(), // advisor_tools.go
	} {
		for _, draft := range []*jsonschema.Draft{jsonschema.Draft7, jsonschema.Draft2020} {
			doc, err := jsonDoc(schema)
			if err != nil {
				return nil, err
			}
			c := jsonschema.NewCompiler()
			c.DefaultDraft(draft)
			if err := c.AddResource("output.json", doc); err != nil {
				return nil, err
			}
			sch, err := c.Compile("output.json")
			if err != nil {
				return nil, fmt.Errorf("%s's output schema: %v", tool, err)
			}
			out[tool] = append(out[tool], sch)
		}
	}
	return out, nil
})

// jsonDoc is v as jsonschema reads JSON: through its own decoder.
func jsonDoc(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// checkToolResult checks res as a client that validates results would,
// and as an agent reads it: structured content (present unless isError)
// valid against tool's output schema; one text content, the same JSON as
// the structured content. call runs it on every result of every test.
func checkToolResult(t testing.TB, tool string, res *mcp.CallToolResult) {
	t.Helper()
	schemas, err := compiledOutput()
	if err != nil {
		t.Fatal(err)
	}
	if res.StructuredContent == nil {
		if !res.IsError {
			t.Fatalf("%s: a result that is not an error has no structured content, which its output schema requires", tool)
		}
		return
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, sch := range schemas[tool] {
		if err := sch.Validate(doc); err != nil {
			t.Fatalf("%s: the structured content does not validate against the output schema: %v\n%s", tool, err, b)
		}
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want one text", tool, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T, want text", tool, res.Content[0])
	}
	var fromText, fromStructured any
	json.Unmarshal(b, &fromStructured)
	if err := json.Unmarshal([]byte(tc.Text), &fromText); err != nil || !reflect.DeepEqual(fromText, fromStructured) {
		t.Fatalf("%s: the text content is not the structured content's JSON (%v):\n%s\n%s", tool, err, tc.Text, b)
	}
}

// jsonFields are the JSON names of the fields of struct type t.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// schemaProperties are the property names of an object schema.
func schemaProperties(schema map[string]any) []string {
	var names []string
	for name := range schema["properties"].(map[string]any) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func property(schema map[string]any, name string) map[string]any {
	return schema["properties"].(map[string]any)[name].(map[string]any)
}

// TestOutputSchemasDeclareEveryField: each output schema declares exactly
// the JSON fields of the Go type it describes, at every level; the discover
// schema declares besides the fields of a search across applications,
// which the ToolResult gains with that search.
func TestOutputSchemasDeclareEveryField(t *testing.T) {
	search := []string{"applications", "closest", "matches"}
	for _, tc := range []struct {
		name   string
		schema map[string]any
		typ    reflect.Type
		extra  []string
	}{
		{"oracle_call", callOutputSchema(), reflect.TypeFor[ToolResult](), nil},
		{"oracle_discover", discoverOutputSchema(), reflect.TypeFor[ToolResult](), search},
		{"refusal", property(callOutputSchema(), "refusal"), reflect.TypeFor[Refusal](), nil},
		{"ask", property(callOutputSchema(), "ask"), reflect.TypeFor[AskInfo](), nil},
		{"steward_overview", overviewOutputSchema(), reflect.TypeFor[Overview](), nil},
		{"overview applications", property(overviewOutputSchema(), "applications")["items"].(map[string]any), reflect.TypeFor[OverviewApplication](), nil},
		{"overview payer", property(overviewOutputSchema(), "payer"), reflect.TypeFor[OverviewPayer](), nil},
		{"overview limits", property(overviewOutputSchema(), "limits"), reflect.TypeFor[OverviewLimits](), nil},
	} {
		fields, props := jsonFields(tc.typ), schemaProperties(tc.schema)
		for _, f := range fields {
			if !slices.Contains(props, f) {
				t.Errorf("%s: the output schema does not declare %s's field %q", tc.name, tc.typ.Name(), f)
			}
		}
		for _, p := range props {
			if !slices.Contains(fields, p) && !slices.Contains(tc.extra, p) {
				t.Errorf("%s: the output schema declares %q, which %s does not have", tc.name, p, tc.typ.Name())
			}
		}
	}
	if _, err := compiledOutput(); err != nil {
		t.Fatal(err)
	}
}

// TestToolResultBodyAndError: the body is in the one field that shows it as
// it is, and isError is false only for the application's 2xx answer.
func TestToolResultBodyAndError(t *testing.T) {
	for _, tc := range []struct {
		body               string
		json, text, base64 string
	}{
		{body: `{"a":[1,2.50,"<&>"]}`, json: `{"a":[1,2.50,"<&>"]}`},
		{body: " 42 \n", json: "42"},
		{body: `"a string"`, json: `"a string"`},
		{body: "null", json: "null"},
		{body: "two lines\nof text", text: "two lines\nof text"},
		{body: `{"a":1`, text: `{"a":1`},
		{body: "\"\xff\"", base64: "Iv8i"},
		{body: "\xfe\x00", base64: "/gA="},
		{body: ""},
	} {
		r := answer("a1", 200, []byte(tc.body), nil, 0)
		res, err := structured(r, "", r.IsError())
		if err != nil {
			t.Fatal(err)
		}
		checkToolResult(t, ToolCall, res)
		b := []byte(res.Content[0].(*mcp.TextContent).Text)
		var got struct {
			Body       json.RawMessage `json:"body"`
			BodyText   *string         `json:"bodyText"`
			BodyBase64 *string         `json:"bodyBase64"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if got.Body != nil {
			json.Compact(&compact, got.Body)
		}
		switch {
		case compact.String() != tc.json && !(tc.json != "" && string(got.Body) == tc.json):
			t.Errorf("%q: body %s, want %s (%s)", tc.body, got.Body, tc.json, b)
		case tc.text != "" && (got.BodyText == nil || *got.BodyText != tc.text), tc.text == "" && got.BodyText != nil:
			t.Errorf("%q: bodyText %v, want %q (%s)", tc.body, got.BodyText, tc.text, b)
		case tc.base64 != "" && (got.BodyBase64 == nil || *got.BodyBase64 != tc.base64), tc.base64 == "" && got.BodyBase64 != nil:
			t.Errorf("%q: bodyBase64 %v, want %q (%s)", tc.body, got.BodyBase64, tc.base64, b)
		}
	}
	for _, tc := range []struct {
		r    *ToolResult
		want bool
	}{
		{&ToolResult{Outcome: msg.StateDefinite, Status: 200}, false},
		{&ToolResult{Outcome: msg.StateDefinite, Status: 204}, false},
		{&ToolResult{Outcome: msg.StateDefinite, Status: 299}, false},
		{&ToolResult{Outcome: msg.StateDefinite, Status: 199}, true},
		{&ToolResult{Outcome: msg.StateDefinite, Status: 300}, true},
		{&ToolResult{Outcome: msg.StateDefinite, Status: 404}, true},
		{&ToolResult{Outcome: msg.StateDefinite}, true},
		{&ToolResult{Outcome: msg.StateRefused, Status: 200}, true},
		{&ToolResult{Outcome: msg.StateNotSent}, true},
		{&ToolResult{Outcome: msg.StateUncertain}, true},
		{&ToolResult{Outcome: msg.StatePerformed}, true},
		{&ToolResult{Outcome: msg.StateAwaitingApproval}, false},
	} {
		if got := tc.r.IsError(); got != tc.want {
			t.Errorf("%s %d: isError %v, want %v", tc.r.Outcome, tc.r.Status, got, tc.want)
		}
	}
}

// bodyKind decodes a result's text content (what an agent reads) and says
// what its body is: the JSON kind, or "" when there is none.
func bodyKind(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &r); err != nil {
		t.Fatal(err)
	}
	switch r["body"].(type) {
	case nil:
		return ""
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", r["body"])
	}
}

// TestResultsOfTheRealApplication: answers of the reference application
// through the real host. A 2xx JSON answer is body as JSON, isError false,
// and its replay the same; a 404, a 403 and a 422 are definite answers
// with their status and body, and isError true, the replay of one too;
// each charged nothing (no refusal price). call checks every result
// against its tool's output schema and its text against its JSON.
func TestResultsOfTheRealApplication(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)

	d, res := call(t, ctx, cs, ToolDiscover, map[string]any{"application": "appliance", "query": "sha"})
	if res.IsError || d.Status != 200 || bodyKind(t, res) != "object" || !strings.Contains(string(d.Body), `"id":"text.sha256"`) || d.BodyText != "" {
		t.Fatalf("discover: isError=%v %+v", res.IsError, d)
	}
	c1, res := call(t, ctx, cs, ToolCall, callArgs("ok-1", map[string]any{"text": "hello"}))
	if res.IsError || c1.Status != 200 || bodyKind(t, res) != "object" || !strings.Contains(string(c1.Body), `"sha256":"2cf24dba`) {
		t.Fatalf("call: isError=%v %+v", res.IsError, c1)
	}
	c2, res := call(t, ctx, cs, ToolCall, callArgs("ok-1", map[string]any{"text": "hello"}))
	if res.IsError || !c2.Replayed || c2.Status != 200 || !bytes.Equal(c2.Body, c1.Body) || bodyKind(t, res) != "object" {
		t.Fatalf("replay: isError=%v %+v", res.IsError, c2)
	}

	for _, tc := range []struct {
		name   string
		args   map[string]any
		status int
		code   string // the application's refusal code in its body
	}{
		{"no such operation", withArg(callArgs("e-404", map[string]any{}), "operationId", "no.such.op"), 404, "not_found"},
		{"an unavailable operation", withArg(callArgs("e-403", map[string]any{}), "operationId", "units.currency"), 403, "unavailable"},
		{"arguments against the schema", callArgs("e-422", map[string]any{"text": 5}), 422, "invalid_arguments"},
	} {
		for _, replay := range []bool{false, true} {
			r, res := call(t, ctx, cs, ToolCall, tc.args)
			var body struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			json.Unmarshal(r.Body, &body)
			if !res.IsError || r.Outcome != msg.StateDefinite || r.Status != tc.status || r.Replayed != replay ||
				bodyKind(t, res) != "object" || body.Error.Code != tc.code || r.ReceiptID == "" || r.Charge == nil || *r.Charge != 0 {
				t.Errorf("%s (replay %v): isError=%v %+v body %s", tc.name, replay, res.IsError, r, r.Body)
			}
		}
	}
}

// TestResultsOverStreamableHTTP: the streamable HTTP path serves the same
// server: a 2xx answer is not an error, a 404 is, with its status and body.
func TestResultsOverStreamableHTTP(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := httpSession(t, ctx, s.cfg.Sockets.MCPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	if r, res := call(t, ctx, cs.ClientSession, ToolCall, callArgs("h-1", map[string]any{"text": "x"})); res.IsError || r.Status != 200 || bodyKind(t, res) != "object" {
		t.Fatalf("200: isError=%v %+v", res.IsError, r)
	}
	if r, res := call(t, ctx, cs.ClientSession, ToolDiscover, map[string]any{"application": "appliance", "operationId": "no.such.op"}); !res.IsError || r.Status != 404 || bodyKind(t, res) != "object" {
		t.Fatalf("404: isError=%v %+v", res.IsError, r)
	}
}

// serveFixedAnswers is an application on sock that answers each invoke by
// its operation: "text.plain" with UTF-8 text that is not JSON, "bytes.raw"
// with bytes that are not UTF-8, "json.markup" with JSON holding markup
// characters.
func serveFixedAnswers(t testing.TB, sock string) {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var inv struct {
			OperationID string `json:"operationId"`
		}
		json.Unmarshal(raw, &inv)
		switch inv.OperationID {
		case "text.plain":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "two lines\nof \"text\"")
		case "bytes.raw":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"markup":"<b>&amp;</b>"}`)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// TestResultsOfOtherBodies: an answer that is UTF-8 but not JSON is in
// bodyText, one that is not UTF-8 in bodyBase64, and JSON with markup
// characters reads as the application wrote it (no HTML escaping) in the
// text content the agent reads.
func TestResultsOfOtherBodies(t *testing.T) {
	s := newStack(t, stackOpts{noApp: true})
	serveFixedAnswers(t, s.appSock)
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	r, res := call(t, ctx, cs, ToolCall, withArg(callArgs("t-1", map[string]any{}), "operationId", "text.plain"))
	if res.IsError || r.BodyText != "two lines\nof \"text\"" || r.Body != nil || r.BodyBase64 != "" {
		t.Fatalf("text: %+v", r)
	}
	r, res = call(t, ctx, cs, ToolCall, withArg(callArgs("b-1", map[string]any{}), "operationId", "bytes.raw"))
	if res.IsError || r.BodyBase64 != "//4AAQ==" || r.Body != nil || r.BodyText != "" {
		t.Fatalf("bytes: %+v", r)
	}
	r, res = call(t, ctx, cs, ToolCall, withArg(callArgs("j-1", map[string]any{}), "operationId", "json.markup"))
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError || string(r.Body) != `{"markup":"<b>&amp;</b>"}` || !strings.Contains(text, `"body":{"markup":"<b>&amp;</b>"}`) {
		t.Fatalf("markup: %+v\n%s", r, text)
	}
}

// TestToolListing: what a client learns from initialize and tools/list:
// instructions naming the three steps in order; each tool's output schema
// as declared, its annotations, and a description for every input field;
// application neither required nor an enum; address declared on
// oracle_call and oracle_discover; and every argument field the tools
// decode declared in their input schemas.
func TestToolListing(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	in := cs.InitializeResult().Instructions
	if a, b, c := strings.Index(in, "1. steward_overview"), strings.Index(in, "2. oracle_discover"), strings.Index(in, "3. oracle_call"); a < 0 || b < a || c < b {
		t.Fatalf("instructions do not name overview, discover, call in order:\n%s", in)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		output      map[string]any
		annotations *mcp.ToolAnnotations
		fields      []string
	}{
		ToolOverview: {overviewOutputSchema(), overviewAnnotations, nil},
		ToolDiscover: {discoverOutputSchema(), discoverAnnotations, jsonFields(reflect.TypeFor[DiscoverArgs]())},
		ToolCall:     {callOutputSchema(), callAnnotations, jsonFields(reflect.TypeFor[CallArgs]())},
	}
	for _, tl := range lt.Tools {
		w := want[tl.Name]
		got, _ := json.Marshal(tl.OutputSchema)
		declared, _ := json.Marshal(w.output)
		if !bytes.Equal(got, declared) {
			t.Errorf("%s: the output schema listed is not the one declared:\n%s\n%s", tl.Name, got, declared)
		}
		if !reflect.DeepEqual(tl.Annotations, w.annotations) {
			t.Errorf("%s: annotations %+v, want %+v", tl.Name, tl.Annotations, w.annotations)
		}
		input := tl.InputSchema.(map[string]any)
		props, _ := input["properties"].(map[string]any)
		for name, p := range props {
			if d, _ := p.(map[string]any)["description"].(string); len(d) < 20 {
				t.Errorf("%s: input field %s has no description (%q)", tl.Name, name, d)
			}
		}
		if app, ok := props["application"].(map[string]any); ok && app["enum"] != nil {
			t.Errorf("%s: application is an enum: %v", tl.Name, app["enum"])
		}
		if req, _ := input["required"].([]any); slices.Contains(req, any("application")) {
			t.Errorf("%s: application is required", tl.Name)
		}
		if tl.Name != ToolOverview && props["address"] == nil {
			t.Errorf("%s: no address field", tl.Name)
		}
		// Every field the tool decodes is in its input schema; address
		// may be in the schema before the arguments decode it.
		for _, f := range w.fields {
			if props[f] == nil {
				t.Errorf("%s: decodes %q, which its input schema does not declare", tl.Name, f)
			}
		}
		for name := range props {
			if !slices.Contains(w.fields, name) && name != "address" {
				t.Errorf("%s: declares %q, which it does not decode", tl.Name, name)
			}
		}
	}
	if len(lt.Tools) != 3 {
		t.Fatalf("%d tools", len(lt.Tools))
	}
}

// TestArgumentRefusalsInStewardsWords: arguments the tools cannot decode
// are refused in the words of their input schema, never the decoder's
// (Go types, struct fields, "json:"), with nothing journaled or sent.
func TestArgumentRefusalsInStewardsWords(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	without := func(args map[string]any, key string) map[string]any { delete(args, key); return args }
	callFields := strings.Join(argFields(&CallArgs{}), ", ")
	discoverFields := strings.Join(argFields(&DiscoverArgs{}), ", ")
	seq := s.lastSeq()
	for _, tc := range []struct {
		tool string
		args any
		want string // after "arguments refused: "
	}{
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "requestId", 5), "requestId: must be a string, not a number"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "conversationId", []int{1}), "conversationId: must be a string, not an array"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "operationId", true), "operationId: must be a string, not true"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "foo", 1), `unknown field "foo" (the fields are ` + callFields + ")"},
		{ToolCall, withArg(without(callArgs("w-1", map[string]any{}), "requestId"), "RequestID", "w-1"), `unknown field "RequestID" (did you mean "requestId"?)`},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "arguments", 5), "arguments: must be a JSON object"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "arguments", "{}"), "arguments: must be a JSON object"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "timeoutMs", 1.5), "timeoutMs: must be an integer written without a fraction or exponent, not 1.5"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "timeoutMs", json.RawMessage("1e3")), "timeoutMs: must be an integer written without a fraction or exponent, not 1e3"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "timeoutMs", json.RawMessage("99999999999999999999")), "timeoutMs: 99999999999999999999 is too large"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "timeoutMs", "500"), "timeoutMs: must be an integer, not a string"},
		{ToolCall, json.RawMessage(`{"application":"appliance","application":"appliance"}`), `the tool's arguments are not valid JSON: duplicate key "application" at offset 27`},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "justification", strings.Repeat("j", msg.MaxJustification+1)), "justification: 513 bytes, at most 512"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "justification", "one\ntwo"), "justification: must be one line, without line breaks"},
		{ToolCall, withArg(callArgs("w-1", map[string]any{}), "justification", 5), "justification: must be a string, not a number"},
		{ToolCall, json.RawMessage(`5`), "the tool's arguments must be a JSON object, not a number"},
		{ToolCall, json.RawMessage(`[]`), "the tool's arguments must be a JSON object, not an array"},
		{ToolDiscover, json.RawMessage(`"appliance"`), "the tool's arguments must be a JSON object, not a string"},
		{ToolDiscover, map[string]any{"application": "appliance", "limit": "10"}, "limit: must be an integer, not a string"},
		{ToolDiscover, map[string]any{"application": "appliance", "query": map[string]any{}}, "query: must be a string, not an object"},
		{ToolDiscover, map[string]any{"application": "appliance", "requestId": "r"}, `unknown field "requestId" (the fields are ` + discoverFields + ")"},
	} {
		r, res := call(t, ctx, cs, tc.tool, tc.args)
		want := "arguments refused: " + tc.want
		if !res.IsError || r.Outcome != msg.StateRefused || r.Refusal == nil || r.Refusal.Code != msg.CodeBadRequest || r.Refusal.Reason != want || r.AttemptID != "" {
			t.Errorf("%s %v: %+v %+v, want the refusal %q", tc.tool, tc.args, r, r.Refusal, want)
		}
	}
	// One look at the journal for them all: opening it read-only takes a
	// quarter of a second here, and no refusal carried an attempt id.
	if s.lastSeq() != seq {
		t.Errorf("a refusal journaled something: last sequence %d -> %d", seq, s.lastSeq())
	}
	// The overview takes no arguments: absent or null are none; a field
	// is refused in text alone (its output schema is the Overview's).
	for _, args := range []any{nil, json.RawMessage("null"), map[string]any{}} {
		if _, res := call(t, ctx, cs, ToolOverview, args); res.IsError {
			t.Fatalf("overview with arguments %v: %+v", args, res)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolOverview, Arguments: map[string]any{"foo": 1}})
	if err != nil {
		t.Fatal(err)
	}
	checkToolResult(t, ToolOverview, res)
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || text != `arguments refused: unknown field "foo": this tool takes no arguments` {
		t.Fatalf("overview: isError=%v %q", res.IsError, text)
	}
}
