package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMCPHTTPWebOrigin: a request that names a web page other than one on
// loopback in Origin (what a browser sends, and a DNS-rebinding page would)
// is refused 403 with a JSON-RPC error carrying its id, before anything is
// served or journaled; a request with no Origin, as MCP clients send, or a
// loopback page's, is served. Each refused origin is one step past an
// accepted one.
func TestMCPHTTPWebOrigin(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := unixHTTPClient(s.cfg.Sockets.MCPHTTP)
	defer hc.CloseIdleConnections()
	initialize := func(origins ...string) (int, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpEndpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for _, o := range origins {
			req.Header.Add("Origin", o)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			del, _ := http.NewRequestWithContext(ctx, http.MethodDelete, httpEndpoint, nil)
			del.Header.Set("Mcp-Session-Id", sid)
			if r, err := hc.Do(del); err == nil {
				r.Body.Close()
			}
		}
		return resp.StatusCode, string(out)
	}
	for _, origins := range [][]string{nil, {"http://localhost"}, {"http://LocalHost:6274"}, {"https://127.0.0.1:8443"},
		{"http://127.255.255.254"}, {"http://[::1]:3000"}} {
		if code, out := initialize(origins...); code != http.StatusOK || !strings.Contains(out, `"serverInfo"`) {
			t.Errorf("Origin %q: %d %s, want 200 and the initialize result", origins, code, out)
		}
	}
	seq := s.lastSeq()
	for _, origins := range [][]string{
		{"http://evil.example.com"},         // the conformance suite's rebinding page
		{"http://localhost.example.com"},    // a name that begins like localhost
		{"http://128.0.0.1"},                // past 127.0.0.0/8
		{"http://[::2]"},                    // past ::1
		{"file://localhost"},                // not a web page's scheme
		{"null"},                            // a sandboxed or local-file page
		{"http://localhost/path"},           // not an origin
		{"http://localhost", "http://evil"}, // two origins
	} {
		code, out := initialize(origins...)
		text, _ := json.Marshal("steward: a request from the web page " + strconv.Quote(strings.Join(origins, ", ")) +
			" is refused: this socket serves MCP clients, not pages in a browser other than on this host's loopback; nothing was sent")
		want := `{"jsonrpc":"2.0","id":5,"error":{"code":-32001,"message":` + string(text) + "}}\n"
		if code != http.StatusForbidden || out != want {
			t.Errorf("Origin %q: %d %s\nwant 403 %s", origins, code, out, want)
		}
	}
	if s.lastSeq() != seq {
		t.Error("a refused web page's request journaled something")
	}
}
