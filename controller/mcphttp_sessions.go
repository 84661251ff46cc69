package controller

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One session, one owner (DESIGN.md section 7, "Streamable HTTP"). An
// HTTP session outlives its connections and is named by the
// Mcp-Session-Id header alone, which any client can send: the controller,
// not the go-sdk handler, keeps each session to the peer that opened it.
// The binding is made under the lock that counts the account's sessions,
// and a session id the controller has not bound to the request's peer is
// never handed to the go-sdk handler.

// mcpHTTP serves MCP over streamable HTTP for admitted peers.
type mcpHTTP struct {
	c   *Controller
	srv *mcp.Server
	h   *mcp.StreamableHTTPHandler

	// mu guards owners and opening, and is held across each cap check
	// and the place it takes, so that concurrent initializes of one
	// account are counted one after the other.
	mu      sync.Mutex
	owners  map[string]httpPeer // session id -> the peer that opened it
	opening map[uint32]int      // places taken by initializes not yet bound, per uid
}

// httpPeer is an HTTP connection's admitted peer: its uid and agent.
type httpPeer struct {
	uid   uint32
	agent string
}

// httpPeerKey is the context key of a request's httpPeer, set from its
// connection's SO_PEERCRED.
type httpPeerKey struct{}

// httpSessionNotOpen answers a request naming a session that is not open
// to its peer: one that was closed, never was, or is another agent's. The
// three are answered alike (404, the specification's answer for a session
// the server does not serve, after which a client starts a new one), so
// the answer tells no agent whether another's session id is live.
const httpSessionNotOpen = "no MCP session with this id is open to this agent; send initialize without Mcp-Session-Id to open one; nothing was sent"

// sessionIDPrefix is how much of a session id a log line shows: enough
// to tell sessions apart in one log, far too little to name one (a go-sdk
// id is 26 base32 characters, 130 bits; 6 of them are 30).
const sessionIDPrefix = 6

// shortSessionID is sid as steward logs it: its first characters and an
// ellipsis, never the whole id, which is the session's only credential
// besides the peer check.
func shortSessionID(sid string) string {
	if len(sid) <= 2*sessionIDPrefix {
		return "…"
	}
	return sid[:sessionIDPrefix] + "…"
}

// reservation is the place an initialize holds under its account's cap
// from its check until its session is bound or the request ends.
type reservation struct {
	peer  httpPeer
	bound bool
}

// reserve takes a place for a new session of peer, or says why there is
// none: mcp.sock's caps, counted over the bound sessions still open and
// the places taken by initializes in flight, all under m.mu.
func (m *mcpHTTP) reserve(peer httpPeer) (*reservation, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	total, mine := 0, m.opening[peer.uid]
	for _, p := range m.owners {
		total++
		if p.uid == peer.uid {
			mine++
		}
	}
	for _, n := range m.opening {
		total += n
	}
	if mine >= mcpMaxPerUID || total >= mcpMaxConns {
		return nil, fmt.Sprintf("too many MCP sessions are open (at most %d per account, %d in all); close one and connect again", mcpMaxPerUID, mcpMaxConns)
	}
	m.opening[peer.uid]++
	return &reservation{peer: peer}, ""
}

// pruneLocked forgets the bound sessions the go-sdk server no longer has
// (closed by DELETE, the idle bound or a failed initialize). The server's
// list is read under m.mu: a session is in it from before its binding
// (go-sdk connects it before it writes the response that bind sees) until
// it closes, so no session bound while the list is read can be missed
// and dropped from the count, or from the owner check.
func (m *mcpHTTP) pruneLocked() {
	open := map[string]bool{}
	for ss := range m.srv.Sessions() {
		if id := ss.ID(); id != "" {
			open[id] = true
		}
	}
	for sid := range m.owners {
		if !open[sid] {
			delete(m.owners, sid)
		}
	}
}

// bind makes sid the session of res's peer, turning res's place into the
// session's in one step, so that it is never counted twice nor not at all.
func (m *mcpHTTP) bind(res *reservation, sid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !res.bound {
		res.bound = true
		m.dropPlaceLocked(res.peer.uid)
	}
	m.owners[sid] = res.peer
}

// release gives back res's place if no session was bound to it (the
// initialize was refused, or go-sdk answered it with no session).
func (m *mcpHTTP) release(res *reservation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !res.bound {
		res.bound = true
		m.dropPlaceLocked(res.peer.uid)
	}
}

func (m *mcpHTTP) dropPlaceLocked(uid uint32) {
	if m.opening[uid]--; m.opening[uid] <= 0 {
		delete(m.opening, uid)
	}
}

// servesFor reports whether sid is a session bound to peer. A session
// bound to another peer is logged at WARN, naming both agents and a
// prefix of the id, and not served: nothing of the request reaches the
// go-sdk handler, so nothing is journaled, consented or charged for it.
func (m *mcpHTTP) servesFor(peer httpPeer, sid string) bool {
	m.mu.Lock()
	owner, known := m.owners[sid]
	m.mu.Unlock()
	if known && owner == peer {
		return true
	}
	if known {
		m.c.log.Warn("mcp http: a request named another agent's session; refused 404",
			"agent", peer.agent, "uid", peer.uid, "owner", owner.agent, "ownerUID", owner.uid, "session", shortSessionID(sid))
	}
	return false
}

// closeSessions closes every session this server opened, so that their
// streams end and the HTTP server can stop.
func (m *mcpHTTP) closeSessions() {
	m.mu.Lock()
	mine := make(map[string]bool, len(m.owners))
	for sid := range m.owners {
		mine[sid] = true
	}
	m.mu.Unlock()
	for ss := range m.srv.Sessions() {
		if mine[ss.ID()] {
			ss.Close()
		}
	}
}

// ownerRecorder calls record with the response's headers before the first
// byte of the response is written: a session is bound to its peer before
// its client can learn its id.
type ownerRecorder struct {
	http.ResponseWriter
	record func(http.Header)
	done   bool
}

func (o *ownerRecorder) once() {
	if !o.done {
		o.done = true
		o.record(o.Header())
	}
}

// WriteHeader records, then writes the status.
func (o *ownerRecorder) WriteHeader(code int) { o.once(); o.ResponseWriter.WriteHeader(code) }

// Write records, then writes.
func (o *ownerRecorder) Write(p []byte) (int, error) { o.once(); return o.ResponseWriter.Write(p) }

// Flush records, then flushes.
func (o *ownerRecorder) Flush() {
	o.once()
	if f, ok := o.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (o *ownerRecorder) Unwrap() http.ResponseWriter { return o.ResponseWriter }
