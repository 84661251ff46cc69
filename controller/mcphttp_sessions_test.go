package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/wire"
)

// debugLog is a logger writing every level as text to lines: what a test
// reads of the controller's log.
func debugLog(lines *logLines) *slog.Logger {
	return slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// checkNoSessionID fails t if a line of the log holds one of ids in full.
func checkNoSessionID(t *testing.T, lines *logLines, ids []string) {
	t.Helper()
	lines.mu.Lock()
	defer lines.mu.Unlock()
	if len(lines.lines) == 0 {
		t.Fatal("the log is empty: nothing was checked")
	}
	for _, line := range lines.lines {
		for _, id := range ids {
			if strings.Contains(line, id) {
				t.Fatalf("the log holds the session id %s in full: %s", id, line)
			}
		}
	}
}

// httpInit is a raw initialize request with the id n.
func httpInit(n int) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, httpEndpoint, strings.NewReader(fmt.Sprintf(
		`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, n)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req
}

// httpAnswer is one response, read whole.
type httpAnswer struct {
	status int
	sid    string
	body   string
}

func doHTTP(cl *http.Client, req *http.Request) (httpAnswer, error) {
	resp, err := cl.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(out)}, err
}

// sessionCapRefusal is the exact answer to the initialize with id n past
// the account's session cap.
func sessionCapRefusal(n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32001,"message":"steward: too many MCP sessions are open (at most %d per account, %d in all); close one and connect again"}}`+"\n",
		n, mcpMaxPerUID, mcpMaxConns)
}

// TestMCPHTTPSessionCapConcurrent: cap+16 initializes from one account,
// released together, open exactly cap sessions; the rest are refused 429
// with the cap's line, and one more after them too. Deleting them all
// frees the account for the next round. The socket's per-account
// connection cap equals the session cap, so cap+16 requests at once could
// not all connect to the socket Serve binds: the test serves the
// controller's streamable HTTP server (serveMCPHTTP, the same session
// code) on a socket whose connection cap alone is wider. The log holds no
// session id in full.
func TestMCPHTTPSessionCapConcurrent(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	var lines logLines
	c, err := open(s.cfgPath, debugLog(&lines), historyOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.firstRequest = DefaultFirstRequestTimeout
	n := mcpMaxPerUID + 16
	ln, err := wire.Listen(wire.ListenConfig{
		Path: s.cfg.Sockets.MCPHTTP, Mode: mcpHTTPSocketMode, Allow: c.allowAgent,
		MaxConns: mcpMaxConns, MaxPerUID: 2 * n, RefuseTimeout: c.firstRequest, Refuse: c.refuseHTTP, Logger: c.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); c.serveMCPHTTP(ctx, ln, c.newMCPServer()) }()
	defer func() { cancel(); <-served }()
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.cfg.Sockets.MCPHTTP)
		}}}
	var all []string
	for round := range 4 {
		sids := concurrentInits(t, cl, n)
		all = append(all, sids...)
		if a, err := doHTTP(cl, httpInit(1000)); err != nil || a.status != http.StatusTooManyRequests || a.body != sessionCapRefusal(1000) {
			t.Fatalf("round %d: one more initialize: %+v %v", round, a, err)
		}
		for _, sid := range sids {
			req, _ := http.NewRequest(http.MethodDelete, httpEndpoint, nil)
			req.Header.Set("Mcp-Session-Id", sid)
			if a, err := doHTTP(cl, req); err != nil || a.status != http.StatusNoContent {
				t.Fatalf("round %d: delete: %+v %v", round, a, err)
			}
		}
	}
	cancel()
	<-served
	checkNoSessionID(t, &lines, all)
}

// concurrentInits sends n initializes at once, each on its own
// connection, and checks that exactly mcpMaxPerUID open a session, each
// its own, and the rest are refused with the cap's line. It returns the
// sessions' ids.
func concurrentInits(t *testing.T, cl *http.Client, n int) []string {
	t.Helper()
	start := make(chan struct{})
	answers := make([]httpAnswer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		req := httpInit(i + 1)
		wg.Go(func() {
			<-start
			answers[i], errs[i] = doHTTP(cl, req)
		})
	}
	close(start)
	wg.Wait()
	var sids []string
	seen := map[string]bool{}
	refused := 0
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			t.Fatalf("initialize %d: %v", i+1, errs[i])
		case a.status == http.StatusOK && a.sid != "" && !seen[a.sid]:
			seen[a.sid] = true
			sids = append(sids, a.sid)
		case a.status == http.StatusTooManyRequests && a.body == sessionCapRefusal(i+1) && a.sid == "":
			refused++
		default:
			t.Fatalf("initialize %d: %d %q %s", i+1, a.status, a.sid, a.body)
		}
	}
	if len(sids) != mcpMaxPerUID || refused != n-mcpMaxPerUID {
		t.Fatalf("%d initializes at once: %d sessions, %d refused; want %d and %d", n, len(sids), refused, mcpMaxPerUID, n-mcpMaxPerUID)
	}
	return sids
}

// TestMCPHTTPSessionLog: a run of the controller with HTTP sessions (go-sdk's
// client: initialize, a call, DELETE, and sessions closed at the stop)
// logs no session id in full, at any level.
func TestMCPHTTPSessionLog(t *testing.T) {
	s := newStack(t, stackOpts{edit: withMCPHTTP})
	var lines logLines
	s.startControllerWith(Options{Logger: debugLog(&lines)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string
	for i := range 3 {
		h, err := httpSession(t, ctx, s.cfg.Sockets.MCPHTTP)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID())
		a, res := call(t, ctx, h.ClientSession, ToolCall, callArgs(fmt.Sprintf("log%d", i), map[string]any{"text": "hello"}))
		if res.IsError || a.Status != 200 {
			t.Fatalf("call: %+v", a)
		}
		if i == 0 {
			h.Close() // a DELETE
		}
	}
	s.stopController() // the other two are closed by the controller
	if _, ok := lines.find("controller ready"); !ok {
		t.Fatal("the controller's log was not captured")
	}
	checkNoSessionID(t, &lines, ids)
}

// hijackCall is an oracle_call with the JSON-RPC id n on the session of
// cs, as another account's client would send it.
func hijackCall(ctx context.Context, cs *mcp.ClientSession, n int) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpEndpoint, strings.NewReader(fmt.Sprintf(
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"oracle_call","arguments":{"application":"appliance","requestId":"hj%d","conversationId":"c","operationId":"text.sha256","arguments":{"text":"x"}}}}`, n, n)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	return req
}

// notOpenAnswer is the exact answer to a request with id (JSON) naming a
// session not open to its peer.
func notOpenAnswer(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32001,"message":"steward: ` + httpSessionNotOpen + `"}}` + "\n"
}

// hijack sends, with cl (another account's), an oracle_call with the id n,
// a GET and a DELETE naming cs's session, and checks each is refused 404
// with the not-open line.
func hijack(t *testing.T, ctx context.Context, cl *http.Client, cs *mcp.ClientSession, n int) {
	t.Helper()
	if a, err := doHTTP(cl, hijackCall(ctx, cs, n)); err != nil || a.status != http.StatusNotFound || a.body != notOpenAnswer(fmt.Sprint(n)) {
		t.Fatalf("an oracle_call on another agent's session: %+v %v\nwant 404 %s", a, err, notOpenAnswer(fmt.Sprint(n)))
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequestWithContext(ctx, method, httpEndpoint, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		if a, err := doHTTP(cl, req); err != nil || a.status != http.StatusNotFound || a.body != notOpenAnswer("null") {
			t.Fatalf("a %s of another agent's session: %+v %v", method, a, err)
		}
	}
}

// hijackWhileOpening is the attack that found the hole: account a opens
// sessions and sends oracle_calls on cs's session, all at once (the
// goroutines released together). Every call is refused with the
// not-open line; a's sessions are closed again.
func hijackWhileOpening(t *testing.T, ctx context.Context, sock string, a testaccount.Account, cs *mcp.ClientSession) {
	t.Helper()
	const each = 16
	cl := httpClientAs(sock, a)
	cl.Transport.(*http.Transport).DisableKeepAlives = true
	start := make(chan struct{})
	inits := make([]httpAnswer, each)
	calls := make([]httpAnswer, each)
	errs := make([]error, 2*each)
	var wg sync.WaitGroup
	for i := range each {
		wg.Go(func() { <-start; inits[i], errs[i] = doHTTP(cl, httpInit(i+1).WithContext(ctx)) })
		wg.Go(func() { <-start; calls[i], errs[each+i] = doHTTP(cl, hijackCall(ctx, cs, 100+i)) })
	}
	close(start)
	wg.Wait()
	for i := range each {
		if errs[i] != nil || errs[each+i] != nil {
			t.Fatalf("request %d: %v %v", i, errs[i], errs[each+i])
		}
		if c := calls[i]; c.status != http.StatusNotFound || c.body != notOpenAnswer(fmt.Sprint(100+i)) {
			t.Fatalf("an oracle_call on another agent's session while sessions open: %+v", c)
		}
		if inits[i].status != http.StatusOK || inits[i].sid == "" {
			t.Fatalf("initialize %d: %+v", i+1, inits[i])
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, httpEndpoint, nil)
		req.Header.Set("Mcp-Session-Id", inits[i].sid)
		if d, err := doHTTP(cl, req); err != nil || d.status != http.StatusNoContent {
			t.Fatalf("delete: %+v %v", d, err)
		}
	}
}

// TestSDKLoggerShortensSessionIDs: go-sdk's INFO lines are dropped; in
// its warnings a session id, in the message, a string, an error or a
// group, is shortened to its prefix.
func TestSDKLoggerShortensSessionIDs(t *testing.T) {
	var lines logLines
	log := sdkLogger(debugLog(&lines))
	const sid = "GN2UAE6TJTUWWVBQBWG2JTKM7C"
	log.Info("server session connected", "session_id", sid)
	log.With("session_id", sid).Warn("writing close event for "+sid,
		"err", fmt.Errorf("session %q: broken", sid), slog.Group("g", "id", sid), "n", 3)
	checkNoSessionID(t, &lines, []string{sid})
	lines.mu.Lock()
	defer lines.mu.Unlock()
	if len(lines.lines) != 1 || strings.Count(lines.lines[0], "GN2UAE…") != 4 || !strings.Contains(lines.lines[0], "n=3") {
		t.Fatalf("the SDK's log: %q", lines.lines)
	}
}
