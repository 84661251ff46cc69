package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/mcpproxy"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// MaxMCPLine bounds one JSON-RPC line on the MCP socket and in the proxy,
// including its newline (DESIGN.md section 8); package mcpproxy owns it.
const MaxMCPLine = mcpproxy.MaxLine

// mcpServerLineBound is the go-sdk decoder's own bound on the socket, a
// backstop only: mcpLines keeps MaxMCPLine exactly, for every peer, and
// go-sdk counts bytes its decoder read ahead into the next message as well,
// so it is given twice the bound.
const mcpServerLineBound = 2 * MaxMCPLine

// Version is reported to MCP clients.
const Version = "0.1.0"

// Overview is the answer of steward_overview: the configured applications
// by name, protocol and live availability. Never sockets, route ids, key
// ids or grant contents.
type Overview struct {
	Applications []OverviewApplication `json:"applications"`
	Payer        OverviewPayer         `json:"payer"`
	// Limits is what the operator's limits for this agent still allow
	// today, as the host reports them (allowance.go).
	Limits OverviewLimits `json:"limits"`
}

// OverviewPayer is what the payer will still consent to for the caller
// (its own principal only, never another's). A call's price is the
// operator's grant's: a discovery's answer carries it (callPrice), and
// each call's charge is in its result.
type OverviewPayer struct {
	Policy         bool   `json:"policy"`                   // false: no paid call is consented to
	MaxPerCall     uint64 `json:"maxPerCall,omitempty"`     // the most one call may be charged
	PerDay         uint64 `json:"perDay,omitempty"`         // the caller's budget a UTC day
	RemainingToday uint64 `json:"remainingToday,omitempty"` // what is left of it
	Day            string `json:"day,omitempty"`            // the UTC day counted; it refills at 00:00 UTC
}

// OverviewApplication is one configured application.
type OverviewApplication struct {
	Application  string `json:"application"`
	Protocol     string `json:"protocol"`
	Availability string `json:"availability"` // "reachable" or "unreachable": can the host be reached for it now
}

// toolHandler runs tool for the session's agent. Every answer carries
// the ToolResult as structured content, refusals included, so that it
// validates against the tool's output schema (TypeScript SDK clients check
// any structured content they get against it, isError or not).
func (c *Controller) toolHandler(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		principal, ok := ctx.Value(principalKey{}).(string)
		if !ok {
			// Every session is connected with its peer's principal; a call
			// without one is refused rather than paid for by nobody.
			r := refused(msg.CodeBadRequest, "the MCP session names no principal; nothing was sent", "")
			return structured(r, r.text, true)
		}
		if tool == ToolDiscover {
			// A search across applications is many attempts, not one
			// (mcpsearch.go, search.go).
			if res, ok := c.searchTool(ctx, req.Params.Arguments, principal); ok {
				return res, nil
			}
		}
		r := c.runTool(ctx, tool, req.Params.Arguments, principal)
		return structured(r, r.text, r.IsError())
	}
}

// principalKey is the context key of an MCP session's agent (its
// principal): the context a session is connected with is the parent of
// its handlers'.
type principalKey struct{}

// structured is a tool's answer: v as structured content and, as the MCP
// specification asks of a tool that returns structured content, the same
// JSON as its text content, unless text gives a reading of its own. The
// JSON is the one rendering because a client that forwards only the text
// to its model (many do) then loses nothing of it (outcome, status, body,
// receipt, charge, refusal), and a client that parses the text as JSON, as
// older ones do, still can; with the body nested as JSON it reads as it
// is. HTML escaping is off: an agent reads "<", not "\u003c".
func structured(v any, text string, isErr bool) (*mcp.CallToolResult, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if text == "" {
		text = string(b)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: json.RawMessage(b),
		IsError:           isErr,
	}, nil
}

// toolError is a refusal of steward_overview's arguments: text only, since
// the overview's output schema is the Overview's (a client checks
// structured content only when it is present).
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// overviewUnreachable is the overview's note when the host's control
// socket did not answer: no application is listed, since only the host
// says which there are.
const overviewUnreachable = "the host cannot be reached now: its applications and your limits are unknown until it can be"

func (c *Controller) overview(ctx context.Context, principal string) Overview {
	o := Overview{Applications: []OverviewApplication{}}
	if principal != "" {
		day := c.pay.today(c.now())
		if lim, left, _, ok := c.pay.budget(principal); ok {
			o.Payer = OverviewPayer{Policy: true, MaxPerCall: lim.MaxPerCall, PerDay: lim.PerDay, RemainingToday: left, Day: dayString(day)}
		}
	}
	// The applications are the host's active routes now (liveroutes.go),
	// and the limits its word for this agent, both on the control channel.
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	routes, err := c.liveRoutes(dctx)
	if err != nil {
		o.Limits = OverviewLimits{Note: overviewUnreachable}
		return o
	}
	o.Limits = OverviewLimits{Note: limitsUnasked}
	if principal != "" {
		o.Limits = c.allowance(dctx, principal)
	}
	for _, r := range routes {
		avail := "unreachable"
		if c.reachable(dctx, r) {
			avail = "reachable"
		}
		o.Applications = append(o.Applications, OverviewApplication{Application: r.Application, Protocol: r.Protocol, Availability: avail})
	}
	o.Applications = slices.DeleteFunc(o.Applications, func(a OverviewApplication) bool { return !o.Limits.allows(a.Application) })
	return o
}

// MCP socket caps. A session is one agent process's whole conversation,
// kept for hours, so the total is generous; one account's sessions are
// capped at a quarter of it so that one agent account (or a runaway loop in
// it) cannot take every session from the others.
const (
	mcpMaxConns  = 256
	mcpMaxPerUID = 64
)

// agentRefusal is the JSON-RPC line a refused MCP peer receives: an error
// answering the request whose id is id (the JSON of it, "null" when there
// was no request to answer).
func agentRefusal(id json.RawMessage, reason string) []byte {
	msg, _ := json.Marshal("steward: " + reason)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":%s}}`+"\n", id, msg)
}

// nullID answers when there is no request id to carry.
var nullID = json.RawMessage("null")

// firstRequestID reads the first request line a peer sends (at most
// MaxMCPLine bytes, until the read deadline the caller set) and returns its
// id, or nullID when there is none: a line that is not a JSON-RPC request
// with a string or number id, or no line at all. The official clients drop
// an error with a null id as a broken session, so a refusal answers the
// request itself when it can.
func firstRequestID(r io.Reader) json.RawMessage {
	line, err := bufio.NewReader(io.LimitReader(r, MaxMCPLine)).ReadBytes('\n')
	if err != nil {
		return nullID
	}
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 {
		return nullID
	}
	switch req.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return req.ID
	}
	return nullID
}

// listenMCP binds the MCP socket: a peer the config names as an agent
// (Config.AgentOf of its SO_PEERCRED uid and gid) is admitted; any other,
// and any past a cap, is answered with one JSON-RPC error to its first
// request, then closed.
func (c *Controller) listenMCP(pre *net.UnixListener) (*wire.Listener, error) {
	return bindOrAdopt(pre, wire.ListenConfig{
		Path: c.cfg.Sockets.MCP,
		Mode: 0o660,
		Allow: func(p wire.PeerCred) error {
			if _, ok := c.cfg.AgentOf(p.UID, p.GID); ok {
				return nil
			}
			return fmt.Errorf("peer uid %d is not on the agent allow-list", p.UID)
		},
		MaxConns:      mcpMaxConns,
		MaxPerUID:     mcpMaxPerUID,
		RefuseTimeout: c.firstRequest,
		Refuse: func(conn *net.UnixConn, reason error) {
			// The agent is told why in steward's words, not the
			// listener's (which name the socket path).
			text := "connection refused"
			if errors.Is(reason, wire.ErrTooManyConns) {
				text = fmt.Sprintf("too many MCP sessions are open (at most %d per account, %d in all); close one and connect again", mcpMaxPerUID, mcpMaxConns)
			} else if cred, err := wire.PeerCredOf(conn); err == nil {
				text = fmt.Sprintf("peer uid %d is not on the agent allow-list", cred.UID)
			}
			conn.Write(agentRefusal(firstRequestID(conn), text))
		},
	})
}

// GC settings of a serving controller when the environment sets none
// (GOGC, GOMEMLIMIT). go-sdk allocates about 0.5-0.65 MB per tools/call,
// nearly all of it garbage by the time the call is answered, over a live
// heap of a few MB: at the default GOGC of 100 that is a collection every
// dozen calls. 400 spends about a sixth less CPU per call (measured by
// BenchmarkMCPCall/clients=16: 766 -> 637 us of controller CPU per call)
// for about 35 MB of RSS instead of 21 under that load; the soft limit
// keeps the heap near 80 MiB should the live heap grow.
const (
	mcpGCPercent   = 400
	mcpMemoryLimit = 80 << 20
)

// tuneGC applies the GC settings above unless the environment chose its own.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(mcpGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(mcpMemoryLimit)
	}
}

// serveMCP runs one MCP session per admitted connection until ln closes.
func (c *Controller) serveMCP(ctx context.Context, ln *wire.Listener, s *mcp.Server) {
	tuneGC()
	for {
		pc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Error("mcp socket accept", "err", err)
			}
			return
		}
		// The session's agent is the kernel's word (SO_PEERCRED), mapped
		// by the config: nothing the agent sends can change it.
		agent, ok := c.cfg.AgentOf(pc.Cred.UID, pc.Cred.GID)
		if !ok {
			pc.Close() // the listener admitted it; the config cannot have changed since
			continue
		}
		go c.serveSession(withPeerUID(context.WithValue(ctx, principalKey{}, agent), pc.Cred.UID), pc, s)
	}
}

// serveSession runs one MCP session of s on pc until it ends or ctx does
// (ctx carries the session's agent): the first request is due within
// c.firstRequest, and every line passes mcpLines' bounds. mcp.sock and
// advisor.sock serve their sessions so.
func (c *Controller) serveSession(ctx context.Context, pc *wire.PeerConn, s *mcp.Server) {
	pc.SetReadDeadline(time.Now().Add(c.firstRequest))
	first := &firstRequestConn{PeerConn: pc, c: c}
	lines := newMCPLines(first, pc) // the exact line bound, and bad lines answered (mcpline.go)
	ss, err := s.Connect(ctx, &mcp.IOTransport{Reader: lines, Writer: pc, MaxLineLength: mcpServerLineBound}, nil)
	if err != nil {
		c.log.Warn("mcp session", "uid", pc.Cred.UID, "err", err)
		pc.Close()
		return
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	ss.Wait()
	pc.Close()
}

// firstRequestConn is an MCP session's connection as its reader sees it:
// until a whole first line has come in, the read deadline set at accept
// runs (the initialize request is due within c.firstRequest), and a
// session that reaches it is answered with a JSON-RPC error, then closed by
// the session's end. Once the first line is in the deadline is cleared: a
// session idle after initialize stays open, as agents keep them for hours.
// Only the session's one reading goroutine calls Read.
type firstRequestConn struct {
	*wire.PeerConn
	c    *Controller
	seen bool // a newline has been read
}

// Read reads from the connection, clearing the deadline at the first
// newline and answering a peer that sent none in time.
func (f *firstRequestConn) Read(p []byte) (int, error) {
	n, err := f.PeerConn.Read(p)
	if f.seen {
		return n, err
	}
	if bytes.IndexByte(p[:n], '\n') >= 0 {
		f.seen = true
		f.PeerConn.SetReadDeadline(time.Time{})
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		// No request was read, so the session has nothing to write: this
		// answer is the only writer on the connection.
		f.c.log.Warn("mcp session sent no request in time", "uid", f.Cred.UID, "pid", f.Cred.PID, "timeout", f.c.firstRequest)
		f.PeerConn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		f.PeerConn.Write(agentRefusal(nullID, fmt.Sprintf("no request within %v of connecting; the session is closed", f.c.firstRequest)))
	}
	return n, err
}
