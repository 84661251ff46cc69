package oracleops

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// The exact bytes and hashes of a few calls are pinned: the controller and
// the host each compute them, and they must agree with each other and
// with every earlier version. The hashes were computed independently with
// printf | sha256sum.
func TestBuildPinnedBytes(t *testing.T) {
	for _, c := range []struct {
		name   string
		build  func() (Request, error)
		method string
		path   string
		body   string
		sha    string
	}{
		{
			name: "invoke",
			build: func() (Request, error) {
				return BuildInvoke("/v1", InvokeBody{
					Arguments:      json.RawMessage(`{ "expression" : "3 * 687 / 365.25" }`),
					ConversationID: "conv-1", OperationID: "calc.evaluate", RequestID: "req-1",
				})
			},
			method: "POST", path: "/v1/invoke",
			body: `{"arguments":{"expression":"3 * 687 / 365.25"},"conversationId":"conv-1","operationId":"calc.evaluate","requestId":"req-1"}`,
			sha:  "12bf5c52d079c1440fb4018f3c86c82d4c63ddfc635c604a53493aeb2a4bdd37",
		},
		{
			name: "invoke nested",
			build: func() (Request, error) {
				return BuildInvoke("/api/v2", InvokeBody{
					Arguments:      json.RawMessage(`{"z":null,"a":{"c":[1.50,true],"b":"\u003c\u00e9>"}}`),
					ConversationID: "c", OperationID: "x.y", RequestID: "r",
				})
			},
			method: "POST", path: "/api/v2/invoke",
			body: `{"arguments":{"a":{"b":"<é>","c":[1.50,true]},"z":null},"conversationId":"c","operationId":"x.y","requestId":"r"}`,
			sha:  "43723380c2f9b8c1a73222c5ca4769626375fff2478f060a5203c322204d5213",
		},
		{
			name: "list",
			build: func() (Request, error) {
				return BuildList("/v1", ListQuery{Query: "exact résumé+x", Availability: AvailabilityAny, Limit: 1, Offset: 3})
			},
			method: "GET", path: "/v1/operations?query=exact%20r%C3%A9sum%C3%A9%2Bx&availability=any&limit=1&offset=3",
			sha: "3f600eadb43775d2f39e82b8f23a2d5706104e6afa6aba850abf345d561dbe5a",
		},
		{
			name:   "list defaults",
			build:  func() (Request, error) { return BuildList("", ListQuery{}) },
			method: "GET", path: "/operations?query=&availability=live_direct&limit=10&offset=0",
			sha: "6708a7051db4c5c4e60c61e67d75e069f3199069de22abbbde4a1318bfedad47",
		},
		{
			name:   "describe",
			build:  func() (Request, error) { return BuildDescribe("/v1", "units.convert") },
			method: "GET", path: "/v1/operations/units.convert",
			sha: "03809b0d9232618d282b0f5d3950ff401e73610124cb0d17ce621a6d65dcbb20",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			if r.Method != c.method || r.Path != c.path || string(r.Body) != c.body {
				t.Fatalf("got %s %s %q\nwant %s %s %q", r.Method, r.Path, r.Body, c.method, c.path, c.body)
			}
			if c.body == "" && r.Body != nil {
				t.Fatalf("GET has a body %q", r.Body)
			}
			sum := r.SHA256()
			if got := hex.EncodeToString(sum[:]); got != c.sha {
				t.Fatalf("sha256 %s, want %s", got, c.sha)
			}
			// Same call, same bytes.
			again, _ := c.build()
			if again.SHA256() != sum {
				t.Fatal("a second build hashed differently")
			}
		})
	}
}

func TestBuildRefusals(t *testing.T) {
	good := InvokeBody{Arguments: json.RawMessage(`{}`), ConversationID: "c", OperationID: "o", RequestID: "r"}
	for _, c := range []struct {
		name string
		b    func() InvokeBody
		want string
	}{
		{"long request id", func() InvokeBody { b := good; b.RequestID = strings.Repeat("r", 81); return b }, "requestId: 81 bytes exceeds the bound of 80"},
		{"long conversation id", func() InvokeBody { b := good; b.ConversationID = strings.Repeat("c", 81); return b }, "conversationId: 81 bytes exceeds the bound of 80"},
		{"long operation id", func() InvokeBody { b := good; b.OperationID = strings.Repeat("o", 161); return b }, "operationId: 161 bytes exceeds the bound of 160"},
		{"array arguments", func() InvokeBody { b := good; b.Arguments = json.RawMessage(`[1]`); return b }, "arguments: must be a JSON object"},
		{"no arguments", func() InvokeBody { b := good; b.Arguments = nil; return b }, "arguments: must be a JSON object"},
		{"bad arguments", func() InvokeBody { b := good; b.Arguments = json.RawMessage(`{"a":1,"a":1}`); return b }, `arguments: json: duplicate key "a" at offset 7`},
	} {
		r, err := BuildInvoke("/v1", c.b())
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		if r.Method != "" || r.Body != nil {
			t.Errorf("%s: a refused build returned a request %+v", c.name, r)
		}
	}
	if _, err := BuildList("/v1", ListQuery{Limit: 51}); err == nil || err.Error() != "limit: 51 exceeds the bound of 50" {
		t.Errorf("limit 51: %v", err)
	}
	if _, err := BuildList("/v1", ListQuery{Query: strings.Repeat("q", 257)}); err == nil || err.Error() != "query: 257 bytes exceeds the bound of 256" {
		t.Errorf("query 257: %v", err)
	}
	if _, err := BuildList("/v1/", ListQuery{}); err == nil {
		t.Error("a trailing / in the prefix was accepted")
	}
	if _, err := BuildDescribe("/v1", "../etc"); err == nil {
		t.Error("describe accepted ../etc")
	}
}

// TestInvokeBodyLimit builds bodies of exactly MaxInvokeBody bytes and
// one more.
func TestInvokeBodyLimit(t *testing.T) {
	b := bodyOfSize(t, MaxInvokeBody)
	r, err := BuildInvoke("/v1", b)
	if err != nil || len(r.Body) != MaxInvokeBody {
		t.Fatalf("at the bound: %d bytes, %v", len(r.Body), err)
	}
	b = bodyOfSize(t, MaxInvokeBody+1)
	if _, err := BuildInvoke("/v1", b); err == nil || err.Error() != "invocation body: 65537 bytes exceeds the bound of 65536" || !errors.Is(err, ErrOutOfBounds) {
		t.Fatalf("one past: %v", err)
	}
}

// bodyOfSize makes an InvokeBody whose canonical encoding is n bytes.
func bodyOfSize(t *testing.T, n int) InvokeBody {
	t.Helper()
	b := InvokeBody{ConversationID: "c", OperationID: "text.sha256", RequestID: "r", Arguments: json.RawMessage(`{"text":""}`)}
	enc, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b.Arguments = json.RawMessage(`{"text":"` + strings.Repeat("x", n-len(enc)) + `"}`)
	return b
}

// TestRequestHTTP sends requests over a real Unix socket and checks that
// the application sees the request line and body byte for byte.
func TestRequestHTTP(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		method, uri, ctype string
		body               []byte
	}
	got := make(chan seen, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Header.Get("Content-Type"), body}
		io.WriteString(w, "{}")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	t.Cleanup(client.CloseIdleConnections)

	list, _ := BuildList("/v1", ListQuery{Query: "a b/c?d#e%", Availability: AvailabilityTextOnly})
	inv, _ := BuildInvoke("/v1", InvokeBody{Arguments: json.RawMessage(`{"x":"é"}`), ConversationID: "c", OperationID: "o", RequestID: "r"})
	for _, r := range []Request{list, inv} {
		req, err := r.HTTP(context.Background(), "http://appliance")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := <-got
		if s.method != r.Method || s.uri != r.Path || string(s.body) != string(r.Body) {
			t.Fatalf("sent %s %s %q, application saw %s %s %q", r.Method, r.Path, r.Body, s.method, s.uri, s.body)
		}
		if r.Body != nil && s.ctype != "application/json" {
			t.Fatalf("content type %q", s.ctype)
		}
	}
	if _, err := list.HTTP(context.Background(), "appliance"); err == nil {
		t.Fatal("a base without scheme was accepted")
	}
	if _, err := list.HTTP(context.Background(), "http://appliance/x"); err == nil {
		t.Fatal("a base with a path was accepted")
	}
}
