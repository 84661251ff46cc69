package appliance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stewardrt/steward/oracleops"
)

// TestExamples invokes every example of every live operation over the
// socket and checks the answer's result is the example's, byte for byte
// (both canonical). Examples of operations that cannot be invoked are
// refused with their availability.
func TestExamples(t *testing.T) {
	a := startApp(t, Config{})
	n := 0
	for _, op := range a.srv.cat.ops {
		if len(op.desc.Examples) < 2 {
			t.Errorf("%s has %d examples, want at least 2", op.desc.ID, len(op.desc.Examples))
		}
		if len(op.desc.Units) == 0 || len(op.desc.Sources) == 0 {
			t.Errorf("%s lacks units or sources", op.desc.ID)
		}
		for i, ex := range op.desc.Examples {
			n++
			status, body := a.invoke("ex-"+strconv.Itoa(n), op.desc.ID, string(ex.Arguments))
			if op.desc.Availability != oracleops.AvailabilityLiveDirect {
				e := errorOf(t, body)
				want := `{"availability":"` + string(op.desc.Availability) + `"}`
				if status != http.StatusForbidden || e.Code != codeUnavailable || string(e.Details.(json.RawMessage)) != want {
					t.Errorf("%s example %d: %d %s", op.desc.ID, i, status, body)
				}
				continue
			}
			want := `{"operationId":"` + op.desc.ID + `","result":` + string(ex.Result) + `}`
			if status != http.StatusOK || string(body) != want {
				t.Errorf("%s example %d (%s):\n got %d %s\nwant %s", op.desc.ID, i, ex.Title, status, body, want)
			}
		}
	}
	if a.srv.cat.byID["reference.si_prefixes"].desc.Availability != oracleops.AvailabilityTextOnly ||
		a.srv.cat.byID["units.currency"].desc.Availability != oracleops.AvailabilityUnavailable {
		t.Error("the catalog lacks its text_only or unavailable operation")
	}
}

// TestRefusalsOfOperations checks the operations' own refusals: status,
// code, reason and position, and that they are journaled like answers.
func TestRefusalsOfOperations(t *testing.T) {
	a := startApp(t, Config{})
	for _, c := range []struct {
		op, args string
		details  string
		message  string
	}{
		{"calc.evaluate", `{"expression":"1 + 2 / (3 - 3)"}`, `{"position":7,"reason":"division_by_zero"}`, "division by zero at position 7"},
		{"calc.evaluate", `{"expression":"2 ^^ 3"}`, `{"position":4,"reason":"syntax"}`, "expected a number or (, found operator ^ at position 4"},
		{"calc.evaluate", `{"expression":"10^5000"}`, `{"position":3,"reason":"overflow"}`, "result exceeds the bound of 4096 bits at position 3"},
		{"units.convert", `{"value":"1","from":"km","to":"kg"}`, `{"from":"length","reason":"incompatible_dimensions","to":"mass"}`, "cannot convert km (length) to kg (mass)"},
		{"units.convert", `{"value":"1","from":"KB","to":"B"}`, `{"reason":"unit"}`, `from: "KB" is ambiguous: write kB for 1000 B or KiB for 1024 B`},
		{"time.duration", `{"from":"2024-01-01T00:00:00Z","to":"2024-01-01T25:00:00Z"}`, `{"reason":"time"}`, ""},
	} {
		before := a.records()
		status, body := a.invoke("refuse-"+strconv.FormatUint(before, 10), c.op, c.args)
		if status == http.StatusUnprocessableEntity && errorOf(t, body).Code == codeInvalidArguments {
			// time.duration's 25:00 is caught by the schema's date-time format.
			if c.op != "time.duration" {
				t.Errorf("%s %s: refused by the schema: %s", c.op, c.args, body)
			}
			continue
		}
		e := errorOf(t, body)
		if status != http.StatusUnprocessableEntity || e.Code != codeRefused || string(e.Details.(json.RawMessage)) != c.details ||
			(c.message != "" && e.Message != c.message) {
			t.Errorf("%s %s: %d %s", c.op, c.args, status, body)
		}
		if a.records() != before+1 {
			t.Errorf("%s: the refusal was not journaled", c.op)
		}
	}
}

func TestListAndPaging(t *testing.T) {
	a := startApp(t, Config{})
	list := func(q oracleops.ListQuery) oracleops.ListReply {
		t.Helper()
		r, err := oracleops.BuildList(DefaultPrefix, q)
		if err != nil {
			t.Fatal(err)
		}
		status, body := a.do(r.Method, r.Path, nil)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", r.Path, status, body)
		}
		// The host's decoder accepts what the appliance sends.
		reply, err := oracleops.DecodeListReply(body)
		if err != nil {
			t.Fatalf("%s: %v", r.Path, err)
		}
		if reply.Limits.RequestBytes != 65536 {
			t.Fatalf("request_bytes %d", reply.Limits.RequestBytes)
		}
		return reply
	}
	ids := func(r oracleops.ListReply) string {
		var s []string
		for _, d := range r.Operations {
			s = append(s, d.ID)
		}
		return strings.Join(s, " ")
	}
	// Paging through everything with limit 1.
	var all []string
	offset := 0
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		r := list(oracleops.ListQuery{Availability: oracleops.AvailabilityAny, Limit: 1, Offset: offset})
		if len(r.Operations) != 1 {
			t.Fatalf("offset %d: %d operations", offset, len(r.Operations))
		}
		all = append(all, r.Operations[0].ID)
		if r.NextOffset == nil {
			break
		}
		if *r.NextOffset != offset+1 {
			t.Fatalf("offset %d: next_offset %d", offset, *r.NextOffset)
		}
		offset = *r.NextOffset
	}
	want := "calc.evaluate reference.si_prefixes text.sha256 time.duration units.convert units.currency"
	if strings.Join(all, " ") != want {
		t.Fatalf("paged %v, want %s", all, want)
	}
	// The default filter is live_direct.
	if got := ids(list(oracleops.ListQuery{})); got != "calc.evaluate text.sha256 time.duration units.convert" {
		t.Errorf("default listing: %s", got)
	}
	for q, want := range map[string]string{
		"SHA":             "text.sha256",
		"exact":           "calc.evaluate units.convert time.duration",
		"°c":              "units.convert",
		"km":              "units.convert",
		"rational ABSENT": "",
		"RFC  3339":       "time.duration",
	} {
		got := ids(list(oracleops.ListQuery{Query: q}))
		wantSorted := strings.Fields(want)
		gotSorted := strings.Fields(got)
		if strings.Join(sortStrings(gotSorted), " ") != strings.Join(sortStrings(wantSorted), " ") {
			t.Errorf("query %q: %q, want %q", q, got, want)
		}
	}
	if got := ids(list(oracleops.ListQuery{Availability: oracleops.AvailabilityTextOnly})); got != "reference.si_prefixes" {
		t.Errorf("text_only: %s", got)
	}
	if got := ids(list(oracleops.ListQuery{Availability: oracleops.AvailabilityUnavailable})); got != "units.currency" {
		t.Errorf("unavailable: %s", got)
	}
	if r := list(oracleops.ListQuery{Availability: oracleops.AvailabilityAny, Offset: 6}); len(r.Operations) != 0 || r.NextOffset != nil {
		t.Errorf("past the end: %+v", r)
	}
	if r := list(oracleops.ListQuery{Availability: oracleops.AvailabilityAny, Limit: 50}); len(r.Operations) != 6 || r.NextOffset != nil {
		t.Errorf("limit 50: %d, %v", len(r.Operations), r.NextOffset)
	}
	if r := list(oracleops.ListQuery{Availability: oracleops.AvailabilityAny, Limit: 5}); len(r.Operations) != 5 || r.NextOffset == nil || *r.NextOffset != 5 {
		t.Errorf("limit 5: %d, %v", len(r.Operations), r.NextOffset)
	}
	// Bounds of the query string, at the limit and one past.
	q256 := strings.Repeat("%C3%A9", 128)
	for _, c := range []struct {
		raw    string
		status int
		msg    string
	}{
		{"query=" + q256, 200, ""},
		{"query=" + q256 + "x", 400, "query: 257 bytes exceeds the bound of 256"},
		{"limit=50", 200, ""},
		{"limit=51", 400, "limit: 51 exceeds the bound of 50"},
		{"limit=1", 200, ""},
		{"limit=0", 400, "limit: 0 is below the minimum of 1"},
		{"offset=1000000", 200, ""},
		{"offset=1000001", 400, "offset: 1000001 exceeds the bound of 1000000"},
		{"availability=everything", 400, `availability: "everything" is not one of live_direct, text_only, unavailable, any`},
		{"sort=id", 400, `query string: unknown parameter "sort"`},
	} {
		status, body := a.do("GET", "/v1/operations?"+c.raw, nil)
		if status != c.status || (c.msg != "" && errorOf(t, body).Message != c.msg) || (c.msg != "" && errorOf(t, body).Code != codeBadRequest) {
			t.Errorf("%.40s: %d %s", c.raw, status, body)
		}
	}
	if status, _ := a.do("POST", "/v1/operations", []byte("{}")); status != http.StatusMethodNotAllowed {
		t.Errorf("POST /operations: %d", status)
	}
	if status, body := a.do("GET", "/v2/operations", nil); status != http.StatusNotFound || errorOf(t, body).Code != codeNotFound {
		t.Errorf("other prefix: %d %s", status, body)
	}
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestDescribe(t *testing.T) {
	a := startApp(t, Config{})
	for _, op := range a.srv.cat.ops {
		r, _ := oracleops.BuildDescribe(DefaultPrefix, op.desc.ID)
		status, body := a.do(r.Method, r.Path, nil)
		if status != http.StatusOK || !bytes.Equal(body, op.encoded) {
			t.Fatalf("%s: %d %s", op.desc.ID, status, body)
		}
		d, err := oracleops.DecodeDescriptor(body)
		if err != nil || d.ID != op.desc.ID {
			t.Fatalf("%s: decoded %v", op.desc.ID, err)
		}
	}
	// Operation id bounds: 160 is a well-formed unknown id, 161 is refused.
	status, body := a.do("GET", "/v1/operations/"+strings.Repeat("a", 160), nil)
	if status != http.StatusNotFound || errorOf(t, body).Code != codeNotFound {
		t.Errorf("160: %d %s", status, body)
	}
	status, body = a.do("GET", "/v1/operations/"+strings.Repeat("a", 161), nil)
	if status != http.StatusBadRequest || errorOf(t, body).Message != "operationId: 161 bytes exceeds the bound of 160" {
		t.Errorf("161: %d %s", status, body)
	}
	status, body = a.do("GET", "/v1/operations/calc%2Eevaluate", nil)
	if status != http.StatusBadRequest {
		t.Errorf("escaped id: %d %s", status, body)
	}
}

// TestInvokeBounds sends each bound of an invocation at the limit and one
// past, and checks that a refusal before the body is understood journals
// nothing.
func TestInvokeBounds(t *testing.T) {
	a := startApp(t, Config{})
	raw := func(rid, cid, oid, args string) []byte {
		return []byte(`{"arguments":` + args + `,"conversationId":"` + cid + `","operationId":"` + oid + `","requestId":"` + rid + `"}`)
	}
	noRecord := func(name string, status int, body []byte, wantStatus int, wantCode, wantMsg string, send func() (int, []byte)) {
		t.Helper()
		before := a.records()
		status, body = send()
		e := errorOf(t, body)
		if status != wantStatus || e.Code != wantCode || (wantMsg != "" && e.Message != wantMsg) {
			t.Errorf("%s: %d %s", name, status, body)
		}
		if a.records() != before {
			t.Errorf("%s: journaled a record", name)
		}
	}
	post := func(b []byte) func() (int, []byte) {
		return func() (int, []byte) { return a.do("POST", "/v1/invoke", b) }
	}
	calc := `{"expression":"1+1"}`

	// requestId: 80 answered, 81 refused.
	if status, body := a.do("POST", "/v1/invoke", raw(strings.Repeat("r", 80), "c", "calc.evaluate", calc)); status != 200 {
		t.Errorf("requestId 80: %d %s", status, body)
	}
	noRecord("requestId 81", 0, nil, 400, codeBadRequest, "requestId: 81 bytes exceeds the bound of 80",
		post(raw(strings.Repeat("r", 81), "c", "calc.evaluate", calc)))
	// conversationId: 80 answered, 81 refused.
	if status, body := a.do("POST", "/v1/invoke", raw("conv80", strings.Repeat("c", 80), "calc.evaluate", calc)); status != 200 {
		t.Errorf("conversationId 80: %d %s", status, body)
	}
	noRecord("conversationId 81", 0, nil, 400, codeBadRequest, "conversationId: 81 bytes exceeds the bound of 80",
		post(raw("conv81", strings.Repeat("c", 81), "calc.evaluate", calc)))
	// operationId: 160 is well-formed (unknown: 404, journaled), 161 refused.
	before := a.records()
	status, body := a.do("POST", "/v1/invoke", raw("op160", "c", strings.Repeat("o", 160), calc))
	if status != 404 || errorOf(t, body).Code != codeNotFound || a.records() != before+1 {
		t.Errorf("operationId 160: %d %s", status, body)
	}
	noRecord("operationId 161", 0, nil, 400, codeBadRequest, "operationId: 161 bytes exceeds the bound of 160",
		post(raw("op161", "c", strings.Repeat("o", 161), calc)))
	noRecord("bad requestId", 0, nil, 400, codeBadRequest, "requestId: byte '.' at offset 1 is not one of A-Za-z0-9_-",
		post(raw("r.1", "c", "calc.evaluate", calc)))
	noRecord("not JSON", 0, nil, 400, codeBadRequest, "json: unexpected 'x' at offset 0", post([]byte("x")))
	noRecord("GET invoke", 0, nil, 405, codeBadRequest, "method not allowed; use POST",
		func() (int, []byte) { return a.do("GET", "/v1/invoke", nil) })

	// Body: exactly 65,536 bytes is answered; 65,537 is refused (413)
	// from its Content-Length, and also when sent chunked.
	at := bodyOfSize(t, oracleops.MaxInvokeBody, "body-at")
	status, body = a.do("POST", "/v1/invoke", at)
	if status != 200 || !strings.Contains(string(body), `"bytes":`) {
		t.Errorf("65536-byte body: %d %.200s", status, body)
	}
	past := bodyOfSize(t, oracleops.MaxInvokeBody+1, "body-past")
	noRecord("65537-byte body", 0, nil, 413, codeTooLarge, "invocation body: 65537 bytes exceeds the bound of 65536", post(past))
	noRecord("65537-byte chunked body", 0, nil, 413, codeTooLarge, "invocation body exceeds the bound of 65536 bytes", func() (int, []byte) {
		req, _ := http.NewRequest("POST", "http://appliance/v1/invoke", struct{ *bytes.Reader }{bytes.NewReader(past)})
		req.ContentLength = -1 // unknown: chunked
		return a.send(req)
	})
	// The refused id was not recorded: sending it within the bound runs.
	if status, body := a.invoke("body-past", "calc.evaluate", calc); status != 200 {
		t.Errorf("after 413 the id is free: %d %s", status, body)
	}

	// Expression: 1024 characters answered, 1025 refused by the schema
	// (journaled: it is an answer to a well-formed invocation).
	expr := "1" + strings.Repeat("+1", 511) + " "
	if status, body := a.invoke("expr-1024", "calc.evaluate", `{"expression":"`+expr+`"}`); status != 200 || !strings.Contains(string(body), `"fraction":"512"`) {
		t.Errorf("1024-character expression: %d %s", status, body)
	}
	status, body = a.invoke("expr-1025", "calc.evaluate", `{"expression":"`+expr+` "}`)
	e := errorOf(t, body)
	if status != 422 || e.Code != codeInvalidArguments || e.Message != "arguments do not match the input schema: at '/expression': maxLength: got 1,025, want 1,024" {
		t.Errorf("1025-character expression: %d %s", status, body)
	}
	// precision: 100 answered, 101 refused.
	if status, body := a.invoke("prec-100", "calc.evaluate", `{"expression":"1/3","precision":100}`); status != 200 {
		t.Errorf("precision 100: %d %s", status, body)
	}
	if status, body := a.invoke("prec-101", "calc.evaluate", `{"expression":"1/3","precision":101}`); status != 422 || errorOf(t, body).Code != codeInvalidArguments {
		t.Errorf("precision 101: %d %s", status, body)
	}
}

// bodyOfSize is a text.sha256 invocation body of exactly n bytes.
func bodyOfSize(t *testing.T, n int, rid string) []byte {
	t.Helper()
	b := oracleops.InvokeBody{ConversationID: "c", OperationID: "text.sha256", RequestID: rid, Arguments: json.RawMessage(`{"text":""}`)}
	enc, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out := []byte(strings.Replace(string(enc), `"text":""`, `"text":"`+strings.Repeat("x", n-len(enc))+`"`, 1))
	if len(out) != n {
		t.Fatalf("built %d bytes, want %d", len(out), n)
	}
	return out
}

func TestUnknownAndUnavailable(t *testing.T) {
	a := startApp(t, Config{})
	for _, c := range []struct {
		op, args  string
		status    int
		code, msg string
	}{
		{"no.such", `{}`, 404, codeNotFound, `no operation "no.such"`},
		{"reference.si_prefixes", `{"prefix":"k"}`, 403, codeUnavailable, "operation reference.si_prefixes is text_only and cannot be invoked"},
		{"units.currency", `{"amount":"1","from":"EUR","to":"USD"}`, 403, codeUnavailable, "operation units.currency is unavailable and cannot be invoked"},
	} {
		before := a.records()
		status, body := a.invoke("u-"+strings.ReplaceAll(c.op, ".", "_"), c.op, c.args)
		e := errorOf(t, body)
		if status != c.status || e.Code != c.code || e.Message != c.msg {
			t.Errorf("%s: %d %s", c.op, status, body)
		}
		if a.records() != before+1 {
			t.Errorf("%s: refusal not journaled", c.op)
		}
		// Replayed identically.
		status2, body2 := a.invoke("u-"+strings.ReplaceAll(c.op, ".", "_"), c.op, c.args)
		if status2 != status || !bytes.Equal(body, body2) || a.records() != before+1 {
			t.Errorf("%s: replay differs: %d %s", c.op, status2, body2)
		}
	}
}
