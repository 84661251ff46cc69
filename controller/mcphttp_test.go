package controller

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/wire/msg"
)

// withMCPHTTP is a stackOpts edit that enables the streamable HTTP socket
// beside mcp.sock.
func withMCPHTTP(m map[string]any) {
	sk := m["sockets"].(map[string]any)
	sk["mcpHTTP"] = filepath.Join(filepath.Dir(sk["mcp"].(string)), "mcp-http.sock")
}

// unixHTTPClient is an http.Client whose every request goes to sock.
func unixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 16,
	}}
}

// httpEndpoint is the URL the clients use; the host part names nothing.
const httpEndpoint = "http://steward/mcp"

// httpClientSession is a go-sdk client session over streamable HTTP.
type httpClientSession struct {
	*mcp.ClientSession
	hc *http.Client
}

// Close ends the session and closes its kept-alive connections, which
// would otherwise hold slots under the socket's caps until the server's
// idle timeout.
func (h *httpClientSession) Close() error {
	err := h.ClientSession.Close()
	h.hc.CloseIdleConnections()
	return err
}

// httpSession connects go-sdk's own streamable HTTP client to sock.
func httpSession(t testing.TB, ctx context.Context, sock string) (*httpClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "steward-http-test", Version: "1"}, nil)
	hc := unixHTTPClient(sock)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: httpEndpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		hc.CloseIdleConnections()
		return nil, err
	}
	h := &httpClientSession{ClientSession: cs, hc: hc}
	t.Cleanup(func() { h.Close() })
	return h, nil
}

// TestMCPHTTPCallReplay: over streamable HTTP, go-sdk's client initializes,
// lists exactly the three tools, calls through the real host and
// application (a charge, a receipt the host signed naming the
// connection's agent), and a replay of the same requestId answers the
// recorded result with nothing journaled or charged.
func TestMCPHTTPCallReplay(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := httpSession(t, ctx, s.cfg.Sockets.MCPHTTP)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if info := cs.InitializeResult().ServerInfo; info.Name != "steward" || info.Version != Version {
		t.Fatalf("server info %+v", info)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"oracle_call", "oracle_discover", "steward_overview"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	before := s.purse()
	c1, res := call(t, ctx, cs.ClientSession, ToolCall, callArgs("http-1", map[string]any{"text": "hello"}))
	if res.IsError || c1.Outcome != msg.StateDefinite || c1.Status != 200 || c1.ReceiptID == "" || c1.Replayed ||
		c1.Charge == nil || *c1.Charge != s.price {
		t.Fatalf("call: %+v", c1)
	}
	after := s.purse()
	if after.Balance != before.Balance-s.price {
		t.Fatalf("balance %d -> %d, want a charge of %d", before.Balance, after.Balance, s.price)
	}
	seq := s.lastSeq()
	c2, res := call(t, ctx, cs.ClientSession, ToolCall, callArgs("http-1", map[string]any{"text": "hello"}))
	if res.IsError || !c2.Replayed || c2.ReceiptID != c1.ReceiptID || c2.AttemptID != c1.AttemptID || !bytes.Equal(c2.Body, c1.Body) {
		t.Fatalf("replay: %+v vs %+v", c2, c1)
	}
	if s.lastSeq() != seq {
		t.Fatal("a replay journaled something")
	}
	if p := s.purse(); p.Balance != after.Balance {
		t.Fatalf("replay charged: %d -> %d", after.Balance, p.Balance)
	}
	agent, _ := s.cfg.AgentOf(uint32(os.Getuid()), uint32(os.Getgid()))
	s.stopController()
	s.checkConsentPrincipals(map[string]string{c1.AttemptID: agent})
}

// TestMCPHTTPBodyBound: a request body of MaxMCPLine bytes is served; one
// byte more is refused 413 with a JSON-RPC error carrying the request's id
// in steward's words, nothing is journaled, and the session goes on.
func TestMCPHTTPBodyBound(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := httpSession(t, ctx, s.cfg.Sockets.MCPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	// go-sdk's client encodes a tools/call as
	// {"jsonrpc":"2.0","id":N,"method":"tools/call","params":{"name":"oracle_call","arguments":{...}}};
	// the padding sets the body's exact length.
	body := func(id int, pad int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"steward_overview","arguments":{},"_meta":{"pad":"%s"}}}`,
			id, strings.Repeat("x", pad))
	}
	base := len(body(7, 0))
	post := func(b []byte) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpEndpoint, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		resp, err := unixHTTPClient(s.cfg.Sockets.MCPHTTP).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	seq := s.lastSeq()
	if code, out := post(body(7, MaxMCPLine-base)); code != http.StatusOK || !strings.Contains(out, `"id":7`) || !strings.Contains(out, "applications") {
		t.Fatalf("at the bound: %d %s", code, out)
	}
	code, out := post(body(8, MaxMCPLine-base+1))
	want := `{"jsonrpc":"2.0","id":8,"error":{"code":-32001,"message":"steward: the request is more than 65536 bytes, the bound of one MCP message; nothing was sent"}}` + "\n"
	if code != http.StatusRequestEntityTooLarge || out != want {
		t.Fatalf("one past the bound: %d %s\nwant 413 %s", code, out, want)
	}
	if s.lastSeq() != seq {
		t.Fatal("a refused body journaled something")
	}

	// Through go-sdk's own client: the oversized call fails with that
	// error, and the same session's next call succeeds.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolOverview, Arguments: map[string]any{},
		Meta: mcp.Meta{"pad": strings.Repeat("x", MaxMCPLine)}})
	if err == nil || !strings.Contains(err.Error(), "steward: the request is more than 65536 bytes") {
		t.Fatalf("oversized call through the client: %v", err)
	}
	if _, res := call(t, ctx, cs.ClientSession, ToolOverview, map[string]any{}); res.IsError {
		t.Fatalf("the session after an oversized call: %+v", res)
	}
}

// TestMCPHTTPAllowList: a peer whose uid is not on the agent allow-list is
// refused at accept with one HTTP answer carrying a JSON-RPC error for its
// request's id, and nothing is journaled.
func TestMCPHTTPAllowList(t *testing.T) {
	other := uint32(os.Getuid()) + 4242
	s := newStack(t, stackOpts{edit: func(m map[string]any) {
		withMCPHTTP(m)
		m["agents"] = map[string]any{"uids": []uint32{other}, "gids": []uint32{}}
	}})
	s.startController()
	seq := s.lastSeq()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, httpEndpoint, strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := unixHTTPClient(s.cfg.Sockets.MCPHTTP).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"steward: peer uid %d is not on the agent allow-list"}}`+"\n", os.Getuid())
	if resp.StatusCode != http.StatusForbidden || string(out) != want {
		t.Fatalf("got %d %s\nwant 403 %s", resp.StatusCode, out, want)
	}
	// go-sdk's client reports the refusal as its connect's error.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := httpSession(t, ctx, s.cfg.Sockets.MCPHTTP); err == nil || !strings.Contains(err.Error(), "is not on the agent allow-list") {
		t.Fatalf("connect: %v", err)
	}
	if s.lastSeq() != seq {
		t.Fatal("a refused peer journaled something")
	}
}

// TestMCPHTTPOffByDefault: without sockets.mcpHTTP nothing is bound
// beside mcp.sock.
func TestMCPHTTPOffByDefault(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	if s.cfg.Sockets.MCPHTTP != "" {
		t.Fatalf("the test stack names sockets.mcpHTTP %q", s.cfg.Sockets.MCPHTTP)
	}
	ents, err := os.ReadDir(filepath.Dir(s.cfg.Sockets.MCP))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 && !slices.Contains([]string{"mcp.sock", "fg.sock", "rev.sock", "fwd.sock", "control.sock", "app.sock"}, e.Name()) {
			t.Fatalf("socket %s bound without sockets.mcpHTTP", e.Name())
		}
	}
	if _, err := net.Dial("unix", filepath.Join(filepath.Dir(s.cfg.Sockets.MCP), "mcp-http.sock")); err == nil {
		t.Fatal("mcp-http.sock answers without sockets.mcpHTTP")
	}
}

// TestMCPHTTPSessionCap: one account may hold mcpMaxPerUID sessions; the
// next initialize is refused 429 with a JSON-RPC error for its id naming
// the cap, and once one session is deleted a new one opens.
func TestMCPHTTPSessionCap(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	cl := unixHTTPClient(s.cfg.Sockets.MCPHTTP)
	do := func(method, sid string, id int) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, id))
		}
		req, _ := http.NewRequest(method, httpEndpoint, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(out)
	}
	var sids []string
	for i := range mcpMaxPerUID {
		resp, out := do(http.MethodPost, "", i+1)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("session %d: %d %s", i+1, resp.StatusCode, out)
		}
		sids = append(sids, sid)
	}
	resp, out := do(http.MethodPost, "", 99)
	want := `{"jsonrpc":"2.0","id":99,"error":{"code":-32001,"message":"steward: too many MCP sessions are open (at most 64 per account, 256 in all); close one and connect again"}}` + "\n"
	if resp.StatusCode != http.StatusTooManyRequests || out != want {
		t.Fatalf("session %d: %d %s\nwant 429 %s", mcpMaxPerUID+1, resp.StatusCode, out, want)
	}
	if resp, out := do(http.MethodDelete, sids[0], 0); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, out)
	}
	if resp, out := do(http.MethodPost, "", 100); resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("after a delete: %d %s", resp.StatusCode, out)
	}
}

// TestMCPHTTPDeadlines: a connection that sends no request within the
// first-request deadline is closed; one whose body does not arrive within
// it is answered 408 with a JSON-RPC error, and nothing is journaled.
func TestMCPHTTPDeadlines(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startControllerWith(Options{FirstRequestTimeout: 300 * time.Millisecond})
	seq := s.lastSeq()

	// t0 before the dial: the controller's deadline runs from its accept,
	// which under load may come before Dial returns.
	t0 := time.Now()
	silent, err := net.Dial("unix", s.cfg.Sockets.MCPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(20 * time.Second)) // a backstop, far past the deadline
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a silent connection: read %d, %v; want it closed (EOF)", n, err)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Fatalf("closed after %v, before the first-request deadline", d)
	}

	slow, err := net.Dial("unix", s.cfg.Sockets.MCPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /mcp HTTP/1.1\r\nHost: steward\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
	slow.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"steward: the request's body did not arrive within 300ms; nothing was sent"}}` + "\n"
	if resp.StatusCode != http.StatusRequestTimeout || string(out) != want {
		t.Fatalf("a slow body: %d %s\nwant 408 %s", resp.StatusCode, out, want)
	}
	if s.lastSeq() != seq {
		t.Fatal("a connection that sent no whole request journaled something")
	}
}
