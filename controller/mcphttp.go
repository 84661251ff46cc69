package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/mcpproxy"
	"github.com/stewardrt/steward/wire"
)

// Streamable HTTP: the same MCP server as mcp.sock, served by the go-sdk's
// streamable handler on the socket sockets.mcpHTTP names (DESIGN.md
// section 7). It is off unless the config names the socket.
const (
	// mcpHTTPMaxHeader bounds one request's header block (http.Server's
	// MaxHeaderBytes; DESIGN.md section 8). An MCP client sends a few
	// hundred bytes of headers.
	mcpHTTPMaxHeader = 16 << 10
	// mcpHTTPIdleConn closes a kept-alive connection with no request in
	// flight, releasing its slot under the socket's caps; the client dials
	// again for its next request.
	mcpHTTPIdleConn = 2 * time.Minute
	// mcpHTTPSessionIdle closes a session no request has used for this
	// long. Unlike a session on mcp.sock, which ends with its connection,
	// an HTTP session outlives its connections, and a client that exits
	// without DELETE leaves it behind: without the bound, abandoned
	// sessions would fill the account's session cap for good. A client
	// whose session was closed is answered 404 and starts a new one (the
	// specification's rule).
	mcpHTTPSessionIdle = time.Hour
	// mcpHTTPShutdownGrace is how long the HTTP server waits for its
	// connections to finish at the controller's stop before closing them.
	mcpHTTPShutdownGrace = 2 * time.Second
	// mcpHTTPSocketMode is the socket's mode. mcp.sock is made by a
	// .socket unit with the agents' group; this socket the controller binds
	// itself in its own directory, whose group is not the agents', so the
	// file mode cannot be the gate: SO_PEERCRED and the agent allow-list
	// are (a refused peer takes no slot, DESIGN.md section 2).
	mcpHTTPSocketMode = 0o666
)

// listenMCPHTTP binds the streamable HTTP socket with mcp.sock's peer
// check and caps: a peer the config names as an agent is admitted; any
// other, and any past a cap, is answered with one HTTP response carrying a
// JSON-RPC error, then closed.
func (c *Controller) listenMCPHTTP() (*wire.Listener, error) {
	return wire.Listen(wire.ListenConfig{
		Path:          c.cfg.Sockets.MCPHTTP,
		Mode:          mcpHTTPSocketMode,
		Allow:         c.allowAgent,
		MaxConns:      mcpMaxConns,
		MaxPerUID:     mcpMaxPerUID,
		RefuseTimeout: c.firstRequest,
		Refuse:        c.refuseHTTP,
		Logger:        c.log,
	})
}

// allowAgent admits a peer the config names as an agent (Config.AgentOf
// of its SO_PEERCRED uid and gid), as mcp.sock does.
func (c *Controller) allowAgent(p wire.PeerCred) error {
	if _, ok := c.cfg.AgentOf(p.UID, p.GID); ok {
		return nil
	}
	return fmt.Errorf("peer uid %d is not on the agent allow-list", p.UID)
}

// refuseHTTP answers a refused connection's first request (read within
// the first-request deadline the listener set) with an HTTP error whose
// body is a JSON-RPC error carrying that request's id when it can be read.
func (c *Controller) refuseHTTP(conn *net.UnixConn, reason error) {
	status, text := http.StatusForbidden, "connection refused"
	if errors.Is(reason, wire.ErrTooManyConns) {
		status = http.StatusTooManyRequests
		text = fmt.Sprintf("too many MCP connections are open (at most %d per account, %d in all); close one and connect again", mcpMaxPerUID, mcpMaxConns)
	} else if cred, err := wire.PeerCredOf(conn); err == nil {
		text = fmt.Sprintf("peer uid %d is not on the agent allow-list", cred.UID)
	}
	id := nullID
	if req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(conn, mcpHTTPMaxHeader+MaxMCPLine))); err == nil {
		body, _ := io.ReadAll(io.LimitReader(req.Body, MaxMCPLine))
		id = bodyRequestID(body)
	}
	body := agentRefusal(id, text)
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// bodyRequestID is the top-level id of the JSON-RPC request in body, as
// the MCP socket finds it (mcpproxy.IDScan, the one reader of a request's
// id from another account's bytes); nullID when there is none. A body cut
// at the bound yields its id only when the id came before the cut.
func bodyRequestID(body []byte) json.RawMessage {
	var scan mcpproxy.IDScan
	scan.Write(body)
	if id := scan.ID(); id != nil {
		return json.RawMessage(bytes.Clone(id))
	}
	return nullID
}

// newMCPHTTP makes the streamable HTTP server of srv. go-sdk's handler
// logs through sdkLogger, which keeps session ids out of the log.
func (c *Controller) newMCPHTTP(srv *mcp.Server) *mcpHTTP {
	m := &mcpHTTP{c: c, srv: srv, owners: map[string]httpPeer{}, opening: map[uint32]int{}}
	m.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(c.log),
		SessionTimeout:      mcpHTTPSessionIdle,
		MaxRequestBodyBytes: MaxMCPLine, // a backstop: ServeHTTP has read the body already
	})
	return m
}

// connContext gives every request on conn its peer: the session's agent
// is the kernel's word (SO_PEERCRED), mapped by the config, as on
// mcp.sock. The go-sdk connects a session with its initialize request's
// context, which so carries principalKey to every tool call of it.
func (m *mcpHTTP) connContext(ctx context.Context, conn net.Conn) context.Context {
	pc, ok := conn.(*wire.PeerConn)
	if !ok {
		return ctx
	}
	agent, ok := m.c.cfg.AgentOf(pc.Cred.UID, pc.Cred.GID)
	if !ok {
		return ctx
	}
	ctx = withPeerUID(context.WithValue(ctx, principalKey{}, agent), pc.Cred.UID)
	return context.WithValue(ctx, httpPeerKey{}, httpPeer{uid: pc.Cred.UID, agent: agent})
}

// ServeHTTP checks the request's peer, reads its body within the bounds,
// refuses a request a web page sent (webOriginRefusal), an initialize
// with params it cannot serve (httpInitializeRefusal) and a batch the
// go-sdk handler does not serve (httpBatchRefusal), serves a session only
// to the peer it is bound to (servesFor: 404 otherwise), binds a new one
// to its peer under the account's cap (reserve, bind), and hands the
// request to the go-sdk handler.
func (m *mcpHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	peer, ok := r.Context().Value(httpPeerKey{}).(httpPeer)
	if !ok {
		// Every connection the listener hands out has an admitted peer;
		// one without is refused rather than served as nobody.
		refuseRequest(w, http.StatusForbidden, nullID, "the connection names no admitted agent; nothing was sent")
		return
	}
	body, ok := m.readBody(w, r)
	if !ok {
		return
	}
	if text := webOriginRefusal(r.Header); text != "" {
		refuseRequest(w, http.StatusForbidden, bodyRequestID(body), text)
		return
	}
	if refusal := httpInitializeRefusal(r, body); refusal != nil {
		refuseWith(w, http.StatusBadRequest, refusal)
		return
	}
	if r.Method == http.MethodPost && mcpproxy.IsBatch(body) {
		if refusal := httpBatchRefusal(r.Header, body); refusal != nil {
			refuseWith(w, http.StatusBadRequest, refusal)
			return
		}
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		if !m.servesFor(peer, sid) {
			refuseRequest(w, http.StatusNotFound, bodyRequestID(body), httpSessionNotOpen)
			return
		}
		m.h.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		m.h.ServeHTTP(w, r) // the go-sdk refuses it: there is no session
		return
	}
	res, text := m.reserve(peer)
	if text != "" {
		refuseRequest(w, http.StatusTooManyRequests, bodyRequestID(body), text)
		return
	}
	defer m.release(res)
	m.h.ServeHTTP(&ownerRecorder{ResponseWriter: w, record: func(h http.Header) {
		if sid := h.Get("Mcp-Session-Id"); sid != "" {
			m.bind(res, sid)
		}
	}}, r)
}

// httpInitializeRefusal answers a POST whose body is one initialize
// request with params steward refuses (initializeVersion): the go-sdk
// handler answers it with error code 0 and opens a session all the same,
// which would hold a place under the account's session cap for
// mcpHTTPSessionIdle. No session is opened; a correct initialize may
// follow. nil for any other request.
func httpInitializeRefusal(r *http.Request, body []byte) []byte {
	if r.Method != http.MethodPost || mcpproxy.IsBatch(body) {
		return nil
	}
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &head) != nil || head.Method == nil || *head.Method != "initialize" || !answerableID(head.ID) {
		return nil
	}
	if _, ok := initializeVersion(head.Params); ok {
		return nil
	}
	return initializeRefusal(head.ID)
}

// refuseWith answers a request with an HTTP error whose body is the
// JSON-RPC error lines refusal.
func refuseWith(w http.ResponseWriter, status int, refusal []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(refusal)
}

// httpBatchRefusal answers a POST whose body is a batch go-sdk's handler
// would refuse with a plain-text 400 (a version without batches, an empty
// batch, a member it cannot decode) or that steward's checks of a batch
// refuse (mcpbatch.go), with JSON-RPC errors, one per request with its own
// id; nil for a batch the handler serves. The version is the request's
// Mcp-Protocol-Version, 2025-03-26 when it names none, as go-sdk reads it.
// go-sdk's handler serves a notification in a batch. The answer is one
// error object, or an array when the body asked at a version with batches
// or holds more than one request.
func httpBatchRefusal(h http.Header, body []byte) []byte {
	version := h.Get("Mcp-Protocol-Version")
	if version == "" {
		version = "2025-03-26"
	}
	answers, asArray, pass := batchVerdict(body, version, true, true)
	if pass {
		return nil
	}
	return batchAnswer(answers, asArray || len(answers) > 1)
}

// readBody reads a POST's body whole, at most MaxMCPLine bytes, within the
// first-request deadline, and puts it back for the go-sdk handler,
// returning it. It answers a body over the bound or too slow itself and
// returns false.
func (m *mcpHTTP) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil, true
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(m.c.firstRequest))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMCPLine))
	// On a refusal the deadline stays: net/http reads what is left of an
	// unread body before it answers, and must not wait on the peer for it.
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		refuseRequest(w, http.StatusRequestEntityTooLarge, bodyRequestID(body),
			fmt.Sprintf("the request is more than %d bytes, the bound of one MCP message; nothing was sent", MaxMCPLine))
		return nil, false
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		refuseRequest(w, http.StatusRequestTimeout, bodyRequestID(body),
			fmt.Sprintf("the request's body did not arrive within %v; nothing was sent", m.c.firstRequest))
		return nil, false
	case err != nil:
		// The peer broke off its body (or sent a malformed chunked one):
		// it is told so if it still reads.
		m.c.log.Warn("mcp http: reading a request body", "err", err)
		refuseRequest(w, http.StatusBadRequest, bodyRequestID(body), "the request's body could not be read whole; nothing was sent")
		return nil, false
	}
	rc.SetReadDeadline(time.Time{})
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body, true
}

// webOriginRefusal says why a request that a web page sent is refused, or
// "" for one that no page sent. The socket is a Unix socket, which no
// browser can reach; but a bridge to TCP on loopback (socat, an SSH
// forward, the conformance test's forwarder) would let any page the
// agent's user visits reach it through DNS rebinding, acting as that
// agent. A browser names the page in Origin on every POST, even to its
// own origin, while MCP clients send none: a request naming an origin
// other than a loopback page (localhost, 127.0.0.0/8, [::1]) is refused.
// The Host header is not checked: clients on a Unix socket put any name
// in it.
func webOriginRefusal(h http.Header) string {
	origins := h.Values("Origin")
	switch {
	case len(origins) == 0:
		return ""
	case len(origins) == 1 && loopbackOrigin(origins[0]):
		return ""
	}
	return fmt.Sprintf("a request from the web page %q is refused: this socket serves MCP clients, not pages in a browser other than on this host's loopback; nothing was sent",
		strings.Join(origins, ", "))
}

// loopbackOrigin reports whether origin (an Origin header) is an http or
// https page on a loopback host.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuseRequest answers a request with an HTTP error whose body is a
// JSON-RPC error: go-sdk's client reports such an answer as that call's
// error and keeps the session.
func refuseRequest(w http.ResponseWriter, status int, id json.RawMessage, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(agentRefusal(id, reason))
}

// peerListener is a wire.Listener as net/http's Serve takes it: every
// connection it hands out is a *wire.PeerConn, which connContext reads.
type peerListener struct{ *wire.Listener }

// Accept returns the next admitted connection.
func (l peerListener) Accept() (net.Conn, error) {
	pc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return pc, nil
}

// Addr is the socket's path.
func (l peerListener) Addr() net.Addr { return &net.UnixAddr{Name: l.Path(), Net: "unix"} }

// serveMCPHTTP serves streamable HTTP on ln until ctx ends or ln closes;
// then it closes the sessions it opened and shuts the HTTP server down.
func (c *Controller) serveMCPHTTP(ctx context.Context, ln *wire.Listener, srv *mcp.Server) {
	m := c.newMCPHTTP(srv)
	hs := &http.Server{
		Handler:           m,
		ReadHeaderTimeout: c.firstRequest,
		IdleTimeout:       mcpHTTPIdleConn,
		MaxHeaderBytes:    mcpHTTPMaxHeader,
		ConnContext:       m.connContext,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(c.log.Handler(), slog.LevelWarn),
	}
	served := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-served:
		}
		m.closeSessions()
		sctx, cancel := context.WithTimeout(context.Background(), mcpHTTPShutdownGrace)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
	}()
	err := hs.Serve(peerListener{ln})
	close(served)
	<-stopped
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		c.log.Error("mcp http socket", "err", err)
	}
}
