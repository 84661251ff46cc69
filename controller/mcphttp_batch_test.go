package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMCPHTTPBatch: over streamable HTTP a batch the go-sdk handler would
// refuse with a plain-text 400 is answered with JSON-RPC errors, one per
// request with its own id (an array when there are several), and the
// session goes on; on a session at 2025-03-26 the handler serves a batch,
// a notification in it included, and one with a member that is not a
// message is answered by steward with an array, nothing of it run.
func TestMCPHTTPBatch(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := httpSession(t, ctx, s.cfg.Sockets.MCPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	hc := unixHTTPClient(s.cfg.Sockets.MCPHTTP)
	defer hc.CloseIdleConnections()
	post := func(sid, version, body string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpEndpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(out)
	}
	wantRefusal := func(sid, version, body, want string) {
		t.Helper()
		if code, _, out := post(sid, version, body); code != http.StatusBadRequest || out != want+"\n" {
			t.Fatalf("%.200s:\n got %d %s\nwant 400 %s", body, code, out, want)
		}
	}
	version := cs.InitializeResult().ProtocolVersion
	notPart := fmt.Sprintf("steward: batches are not part of MCP protocol version %s; send each message on a line of its own", version)
	wantRefusal(cs.ID(), version, "["+ping("1")+","+noticeMsg+`,{"jsonrpc":"2.0","id":"t","method":"tools/list"}]`,
		"["+errLine("1", -32600, notPart)+","+errLine(`"t"`, -32600, notPart)+"]")
	wantRefusal(cs.ID(), version, "["+ping("2")+"]", errLine("2", -32600, notPart))
	wantRefusal(cs.ID(), version, "[]", errLine("null", -32600, "steward: an empty batch is not a request; a batch holds one message or more"))
	if _, res := call(t, ctx, cs.ClientSession, ToolOverview, map[string]any{}); res.IsError {
		t.Fatalf("the session after refused batches: %+v", res)
	}

	// A session at 2025-03-26, which has batches: the handler answers each
	// request of a batch as an event of its own on the POST's stream.
	code, h, out := post("", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := h.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" || !strings.Contains(out, `"protocolVersion":"2025-03-26"`) {
		t.Fatalf("initialize at 2025-03-26: %d %s", code, out)
	}
	defer func() {
		req, _ := http.NewRequest(http.MethodDelete, httpEndpoint, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if code, _, out := post(sid, "2025-03-26", "["+ping(`"p"`)+","+noticeMsg+"]"); code != http.StatusOK || !strings.Contains(out, "data: "+`{"jsonrpc":"2.0","id":"p","result":{}}`+"\n") {
		t.Fatalf("a batch with a notification at 2025-03-26: %d %q", code, out)
	}
	notMessage := `steward: not a JSON-RPC 2.0 message: it needs "jsonrpc":"2.0", a string "method" (or a result or error), and an "id" that is a string or number when it has one`
	wantRefusal(sid, "2025-03-26", "["+ping("4")+",5]",
		"["+errLine("4", -32600, "steward: not run: another message of its batch was refused")+","+errLine("null", -32600, notMessage)+"]")
	if code, _, out := post(sid, "2025-03-26", ping("5")); code != http.StatusOK || !bytes.Contains([]byte(out), []byte(`{"jsonrpc":"2.0","id":5,"result":{}}`)) {
		t.Fatalf("a ping after the refused batch: %d %s", code, out)
	}
}

// TestMCPHTTPInitializeRefusedParams: over streamable HTTP an initialize
// whose params go-sdk refuses (it answers error code 0 and opens a session
// all the same) or that names no protocol version is answered 400 with
// -32602 and its id, and no session is opened; a correct one follows.
func TestMCPHTTPInitializeRefusedParams(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := unixHTTPClient(s.cfg.Sockets.MCPHTTP)
	defer hc.CloseIdleConnections()
	post := func(body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpEndpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(out)
	}
	for i, params := range []string{`,"params":5`, `,"params":null`, ``, `,"params":{}`, `,"params":{"protocolVersion":5}`} {
		id := fmt.Sprint(10 + i)
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize"` + params + `}`
		code, sid, out := post(body)
		if want := errLine(id, -32602, "steward: "+initializeParamsText) + "\n"; code != http.StatusBadRequest || sid != "" || out != want {
			t.Fatalf("%s:\n got %d session %q %s\nwant 400, no session, %s", body, code, sid, out, want)
		}
	}
	code, sid, out := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if code != http.StatusOK || sid == "" || !strings.Contains(out, `"protocolVersion":"2025-06-18"`) {
		t.Fatalf("a correct initialize after the refused ones: %d %q %s", code, sid, out)
	}
	req, _ := http.NewRequest(http.MethodDelete, httpEndpoint, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
	}
}
