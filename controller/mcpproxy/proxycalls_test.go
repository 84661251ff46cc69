package mcpproxy

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func mustID(t testing.TB, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMessageHead: calls, notifications and answers as the server reads
// them, including what a naive reading gets wrong.
func TestMessageHead(t *testing.T) {
	call := func(v any) string { return fmt.Sprintf("call %v", mustID(t, v).Raw()) }
	answer := func(v any) string { return fmt.Sprintf("answer %v", mustID(t, v).Raw()) }
	for _, c := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"id":2,"method":"x"}}`, call(1.0)},
		{` {"method":"ping" , "id" : "a\"b", "jsonrpc":"2.0"}` + "\r\n", call("a\"b")},
		{`{"jsonrpc":"2.0","id":1.7,"method":"ping"}`, call(1.0)},
		{`{"jsonrpc":"2.0","id":1,"method":null}`, call(1.0)},
		{`{"jsonrpc":"2.0","\u0069d":3,"method":"ping"}`, call(3.0)},
		{`{"jsonrpc":"2.0","id":1,"id":4,"method":"ping"}`, call(4.0)},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "none"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "none"},
		{`{"jsonrpc":"2.0","ID":1,"method":"ping"}`, "none"},
		{`{"jsonrpc":"2.0","id":1,"Method":"ping"}`, answer(1.0)},
		{`{"jsonrpc":"2.0","id":1,"method":7}`, "none"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, "none"},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, "none"},
		{`{"id":1,"method":"ping"}`, "none"},
		{`{"jsonrpc":"2.0","id":9,"result":{"content":[{"text":"\"}]}"}]}}`, answer(9.0)},
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}`, answer("x")},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"steward: refused"}}`, "none"},
		{`{"jsonrpc":"2.0","result":{},"id":2,"method":"x"}`, call(2.0)},
		{`[1,2]`, "none"},
		{`not json`, "none"},
		{``, "none"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, "none"},
	} {
		got := "none"
		if h, ok := headOf([]byte(c.line)); ok {
			switch {
			case h.call:
				got = fmt.Sprintf("call %v", h.id.Raw())
			case h.answer:
				got = fmt.Sprintf("answer %v", h.id.Raw())
			}
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.line, got, c.want)
		}
	}
}

// TestOpenCallsBatch: a batch line counts each call in it, and a batch of
// answers answers each.
func TestOpenCallsBatch(t *testing.T) {
	o := newOpenCalls()
	o.forwarding([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}, {"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"b","method":"ping"}]` + "\n"))
	if o.open() != 2 {
		t.Fatalf("%d open, want 2", o.open())
	}
	o.stdinEnded()
	o.copied([]byte(`[{"jsonrpc":"2.0","id":"b","result":{}},{"jsonrpc":"2.0","id":7,"result":{}}]` + "\n"))
	if o.open() != 1 {
		t.Fatalf("%d open, want 1", o.open())
	}
	o.copied([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	select {
	case <-o.answered:
	default:
		t.Fatalf("answered not closed with %d open", o.open())
	}
}

// FuzzMessageHead holds headOf to the server's decoder: whatever
// jsonrpc.DecodeMessage reads as a call or an answer, headOf reads the
// same, with the same id, and it reads a notification as neither. (What
// the server cannot decode ends the session; headOf may say anything.)
func FuzzMessageHead(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","result":{"x":[1,"]"]}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","\u0069d":3,"method":null}`,
		`{"jsonrpc":"2.0","id":1e3,"id":-2.5,"method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return
		}
		h, ok := headOf(b)
		switch m := m.(type) {
		case *jsonrpc.Request:
			if m.IsCall() && (!ok || !h.call || h.id.Raw() != m.ID.Raw()) {
				t.Fatalf("%q: the server reads a call with id %v; headOf: %+v %v", b, m.ID.Raw(), h, ok)
			}
			if !m.IsCall() && ok {
				t.Fatalf("%q: the server reads a notification; headOf: %+v", b, h)
			}
		case *jsonrpc.Response:
			if !ok || !h.answer || h.id.Raw() != m.ID.Raw() {
				t.Fatalf("%q: the server reads an answer with id %v; headOf: %+v %v", b, m.ID.Raw(), h, ok)
			}
		}
	})
}
