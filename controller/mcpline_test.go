package controller

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/mcpproxy"
)

// listLine is a tools/list request line of exactly n bytes (newline
// included) with its id first or last, padded inside params._meta.
func listLine(t *testing.T, n int, id string, first bool) string {
	t.Helper()
	head, tail := `{"jsonrpc":"2.0","method":"tools/list","params":{"_meta":{"pad":"`, `"}}}`+"\n"
	if first {
		head = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{"pad":"`
	} else {
		tail = `"}},"id":` + id + "}\n"
	}
	if n < len(head)+len(tail) {
		t.Fatalf("no line of %d bytes", n)
	}
	return head + strings.Repeat("p", n-len(head)-len(tail)) + tail
}

// nestedLine is a tools/list request with id 1 nested depth levels deep
// (the message's object is the first).
func nestedLine(id string, depth int) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{"x":` +
		strings.Repeat("[", depth-3) + strings.Repeat("]", depth-3) + "}}}\n"
}

// TestMCPSocketSurvivesBadInput sends straight to mcp.sock, as a peer that
// skips the proxy: a line at the bound is passed to the server, one byte
// past it is answered with its own id (first or last in the line) naming
// the bound, a line that is not JSON gets -32700 with id null, nesting past
// the bound an error naming it with the line's id, and after each the same
// session answers a good call.
func TestMCPSocketSurvivesBadInput(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	c, br := dialRaw(t, s.cfg.Sockets.MCP)
	fmt.Fprintf(c, initializeWithID, 1)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	fmt.Fprint(c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")

	goodCall := func(after string) {
		t.Helper()
		fmt.Fprint(c, `{"jsonrpc":"2.0","id":"good","method":"tools/list"}`+"\n")
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"good","result":`) {
			t.Fatalf("a good call after %s: %q, %v", after, line, err)
		}
	}
	send := func(line string) string {
		t.Helper()
		go c.Write([]byte(line))
		got, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after a line of %d bytes: %v", len(line), err)
		}
		return got
	}
	tooLong := func(id string, n int) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"steward: request line of ` + fmt.Sprint(n) +
			` bytes exceeds the bound of 65536 bytes including the newline"}}` + "\n"
	}
	for _, first := range []bool{true, false} {
		where := map[bool]string{true: "id first", false: "id last"}[first]
		got := send(listLine(t, MaxMCPLine, "10", first))
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":10,"result":`) || !strings.Contains(got, `"oracle_call"`) {
			t.Fatalf("at the bound, %s: %.200s", where, got)
		}
		goodCall("a line at the bound")
		if got, want := send(listLine(t, MaxMCPLine+1, `"over-1"`, first)), tooLong(`"over-1"`, MaxMCPLine+1); got != want {
			t.Fatalf("one past the bound, %s:\n got %s\nwant %s", where, got, want)
		}
		goodCall("a line one past the bound")
		if got, want := send(listLine(t, 5*MaxMCPLine, "11", first)), tooLong("11", 5*MaxMCPLine); got != want {
			t.Fatalf("five times the bound, %s:\n got %s\nwant %s", where, got, want)
		}
		goodCall("a line five times the bound")
	}

	for _, line := range []string{"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/list\",}\n", "not json\n"} {
		if got, want := send(line), `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"steward: request line is not JSON"}}`+"\n"; got != want {
			t.Fatalf("%q:\n got %s\nwant %s", line, got, want)
		}
		goodCall("a line that is not JSON")
	}

	notMessage := `"message":"steward: not a JSON-RPC 2.0 message: it needs \"jsonrpc\":\"2.0\", a string \"method\" (or a result or error), and an \"id\" that is a string or number when it has one"}}` + "\n"
	for _, tc := range []struct{ line, id string }{
		{`{"jsonrpc":"1.0","id":15,"method":"tools/list"}`, "15"},
		{`{"jsonrpc":"2.0","id":"m","method":3}`, `"m"`},
		{`{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, "null"},
		{`{"jsonrpc":"2.0","result":{}}`, "null"},
		{`5`, "null"},
	} {
		if got, want := send(tc.line+"\n"), `{"jsonrpc":"2.0","id":`+tc.id+`,"error":{"code":-32600,`+notMessage; got != want {
			t.Fatalf("%s:\n got %s\nwant %s", tc.line, got, want)
		}
		goodCall("JSON that is not a JSON-RPC message")
	}

	if got := send(nestedLine("13", mcpproxy.MaxNesting)); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":13,"result":`) {
		t.Fatalf("nesting at the bound: %.200s", got)
	}
	for _, depth := range []int{mcpproxy.MaxNesting + 1, 1000} {
		want := `{"jsonrpc":"2.0","id":14,"error":{"code":-32600,"message":"steward: request nesting of ` + fmt.Sprint(depth) +
			` levels exceeds the bound of 64 levels of objects and arrays"}}` + "\n"
		if got := send(nestedLine("14", depth)); got != want {
			t.Fatalf("nesting of %d:\n got %s\nwant %s", depth, got, want)
		}
		goodCall("nesting past the bound")
	}
}

// TestMCPSessionOrderAndCapabilities: a request before initialize gets
// -32600 with its id (go-sdk alone answers code 0), ping is answered before
// it, and after it only what the server declares (tools) is served:
// resources and prompts get -32601, method not found.
func TestMCPSessionOrderAndCapabilities(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	c, br := dialRaw(t, s.cfg.Sockets.MCP)
	exchange := func(line, want string, prefix bool) {
		t.Helper()
		fmt.Fprint(c, line+"\n")
		got, err := br.ReadString('\n')
		if err != nil || (prefix && !strings.HasPrefix(got, want)) || (!prefix && got != want+"\n") {
			t.Fatalf("%s:\n got %q, %v\nwant %q", line, got, err, want)
		}
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"steward: \"tools/list\" before initialize; a session begins with an initialize request"}}`, false)
	exchange(`{"jsonrpc":"2.0","id":"p","method":"ping"}`, `{"jsonrpc":"2.0","id":"p","result":{}}`, false)
	exchange(strings.TrimSuffix(fmt.Sprintf(initializeWithID, 3), "\n"), `{"jsonrpc":"2.0","id":3,"result":`, true)
	fmt.Fprint(c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	for i, method := range []string{"resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"} {
		exchange(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, 10+i, method),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"method not found: \"%s\""}}`, 10+i, method), false)
	}
	exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":4,"result":{`, true)
}

// TestMCPSessionlessClientStillServed: go-sdk's own client, straight on
// the socket, first asks server/discover and then speaks the sessionless
// protocol (each request carries its version, with no initialize); the
// before-initialize answer and the capability filter leave it served.
func TestMCPSessionlessClientStillServed(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := net.Dial("unix", s.cfg.Sockets.MCP)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v < sessionlessProtocol {
		t.Fatalf("negotiated %s, want the sessionless protocol (%s or later)", v, sessionlessProtocol)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools/list: %v, %v", tools, err)
	}
	if _, err := cs.ListResources(ctx, nil); err == nil || !strings.Contains(err.Error(), "method not found") {
		t.Fatalf("resources/list: %v, want method not found", err)
	}
}
