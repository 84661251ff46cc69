package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The advisor socket (DESIGN.md section 2): where advisor agents, named by
// the operator's limits (msg.ApprovalPolicy.Advisors), list the asks they
// may answer and answer them (advisor_tools.go). It is off unless the
// config names it (sockets.advisor). The controller binds it itself, like
// mcp-http.sock, never from a socket unit. A peer is admitted only when
// its SO_PEERCRED uid maps to a named agent of the config (never "uid:N",
// never the foreground) and the host, asked with msg.TypeAsks at the
// session's start, answers that agent's asks: the host's word on which
// agents advise is the operator's signed limits. The advisor's name goes
// in every asks and advise the session sends; nothing it writes names it.
const (
	// advisorSocketMode is the socket's mode, mcp-http.sock's and for
	// the same reason: the controller's directory's group is not the
	// agents', so SO_PEERCRED and the host's word are the gate.
	advisorSocketMode = mcpHTTPSocketMode
	// Advisors are few: the caps are below mcp.sock's, so that the
	// advisor socket cannot take the controller's descriptors from its
	// agents.
	advisorMaxConns  = 64
	advisorMaxPerUID = 16
)

// ListenerAdvisor names a passed advisor listener only to refuse it
// (errAdoptedAdvisor).
const ListenerAdvisor = "advisor"

// errAdoptedAdvisor says why a passed advisor listener is refused: the
// controller binds the advisor socket itself, with its own mode, beside
// its MCP socket; a socket unit would make one whose mode and owner are
// the unit's.
var errAdoptedAdvisor = fmt.Errorf("%w: a passed advisor listener cannot be served: the controller binds the advisor socket itself (mode 0666, its peers checked by SO_PEERCRED and the host's word); remove its .socket unit", ErrConfig)

// advisorKey is the context key of an advisor session's agent name. It is
// not principalKey: an advisor session pays for nothing and is never a
// principal.
type advisorKey struct{}

// listenAdvisor binds the advisor socket: a peer whose uid a named agent
// of the config maps is admitted to the session's start (serveAdvisor asks
// the host then); any other, and any past a cap, is answered with one
// JSON-RPC error to its first request, as mcp.sock answers one.
func (c *Controller) listenAdvisor() (*wire.Listener, error) {
	return wire.Listen(wire.ListenConfig{
		Path:  c.cfg.Sockets.Advisor,
		Mode:  advisorSocketMode,
		Allow: c.allowNamedAgent,
		// A refusal's reason is the listener's, which names the path:
		// the peer is told steward's words instead (advisorPeerRefusal).
		MaxConns:      advisorMaxConns,
		MaxPerUID:     advisorMaxPerUID,
		RefuseTimeout: c.firstRequest,
		Refuse: func(conn *net.UnixConn, reason error) {
			conn.Write(agentRefusal(firstRequestID(conn), advisorPeerRefusal(conn, reason)))
		},
		Logger: c.log,
	})
}

// allowNamedAgent admits a peer whose uid a named agent of the config maps.
func (c *Controller) allowNamedAgent(p wire.PeerCred) error {
	if _, ok := c.cfg.NamedAgentOf(p.UID); ok {
		return nil
	}
	return fmt.Errorf("peer uid %d is not a named agent", p.UID)
}

// advisorPeerRefusal is what a peer the listener refused is told.
func advisorPeerRefusal(conn *net.UnixConn, reason error) string {
	if errors.Is(reason, wire.ErrTooManyConns) {
		return fmt.Sprintf("too many advisor sessions are open (at most %d per account, %d in all); close one and connect again", advisorMaxPerUID, advisorMaxConns)
	}
	if cred, err := wire.PeerCredOf(conn); err == nil {
		return fmt.Sprintf("peer uid %d is not a named agent of this controller; the advisor socket serves only agents the operator names as advisors", cred.UID)
	}
	return "connection refused"
}

// serveAdvisor runs one advisor session per admitted connection until ln
// closes: the host is asked whether the peer's agent advises (advisorOf);
// an agent it does not name is answered with one JSON-RPC error to its
// first request and closed, an advisor is served mcp.sock's session
// handling (serveSession) with the advisor's two tools.
func (c *Controller) serveAdvisor(ctx context.Context, ln *wire.Listener) {
	srv := c.newAdvisorServer()
	for {
		pc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Error("advisor socket accept", "err", err)
			}
			return
		}
		agent, ok := c.cfg.NamedAgentOf(pc.Cred.UID)
		if !ok {
			pc.Close() // the listener admitted it; the config cannot have changed since
			continue
		}
		go func() {
			if refusal := c.advisorOf(ctx, agent); refusal != "" {
				c.log.Warn("advisor socket: peer refused", "uid", pc.Cred.UID, "agent", agent, "reason", refusal)
				pc.SetReadDeadline(time.Now().Add(c.firstRequest))
				pc.SetWriteDeadline(time.Now().Add(c.firstRequest + 2*time.Second))
				pc.Write(agentRefusal(firstRequestID(pc), refusal))
				pc.Close()
				return
			}
			c.serveSession(withPeerUID(context.WithValue(ctx, advisorKey{}, agent), pc.Cred.UID), pc, srv)
		}()
	}
}

// advisorOf asks the host whether agent is an advisor (msg.TypeAsks, as
// steward_asks does): "" when the host lists its asks, else the one line
// the peer is told, with no path or other agent in it.
func (c *Controller) advisorOf(ctx context.Context, agent string) string {
	ctx, cancel := context.WithTimeout(ctx, c.firstRequest)
	defer cancel()
	_, refusal, err := c.hostAsks(ctx, agent)
	switch {
	case err != nil:
		return fmt.Sprintf("the host cannot be reached now to say whether agent %q is an advisor; connect again later", agent)
	case refusal == nil:
		return ""
	case refusal.Code == msg.CodeApprovals:
		return fmt.Sprintf("agent %q is not an advisor: no agent limits of this controller's operator name it one; the advisor socket serves only advisors", agent)
	default:
		return fmt.Sprintf("the host does not list asks for advisors (refused %s); the advisor socket cannot serve agent %q", refusal.Code, agent)
	}
}

// hostAsks asks the host, on the control channel, for the asks advisor
// may answer. A refusal (msg.CodeApprovals: not an advisor) is the host's
// answer, not an error; err is a channel's failure or a malformed answer,
// logged here.
func (c *Controller) hostAsks(ctx context.Context, advisor string) (*msg.AsksResult, *msg.Refusal, error) {
	return c.hostAsksPage(ctx, advisor, 0)
}

// hostAsksPage is hostAsks for the page after cursor after (the Next of
// the page before).
func (c *Controller) hostAsksPage(ctx context.Context, advisor string, after uint64) (*msg.AsksResult, *msg.Refusal, error) {
	env, _, err := c.ctl.call(ctx, msg.TypeAsks, msg.Asks{Advisor: advisor, After: after})
	if err != nil {
		c.log.Warn("asking the host for an advisor's asks", "advisor", advisor, "err", err)
		return nil, nil, err
	}
	switch env.T {
	case msg.TypeAsksResult:
		var r msg.AsksResult
		if err := env.Decode(&r); err != nil {
			c.log.Error("the host's asks answer is malformed", "advisor", advisor, "err", err)
			return nil, nil, err
		}
		return &r, nil, nil
	case msg.TypeRefused:
		return nil, decodeRefusal(c, env), nil
	default:
		c.log.Error("the host answered asks with an unexpected frame", "type", env.T)
		return nil, nil, fmt.Errorf("unexpected %s frame", env.T)
	}
}

// hostAdvise sends an advisor's verdict to the host on the control
// channel, as hostAsks asks.
func (c *Controller) hostAdvise(ctx context.Context, a msg.Advise) (*msg.AdviseResult, *msg.Refusal, error) {
	env, _, err := c.ctl.call(ctx, msg.TypeAdvise, a)
	if err != nil {
		c.log.Warn("sending an advisor's verdict to the host", "advisor", a.Advisor, "ask", a.Ask, "err", err)
		return nil, nil, err
	}
	switch env.T {
	case msg.TypeAdviseResult:
		var r msg.AdviseResult
		if err := env.Decode(&r); err != nil {
			c.log.Error("the host's advise answer is malformed", "advisor", a.Advisor, "ask", a.Ask, "err", err)
			return nil, nil, err
		}
		return &r, nil, nil
	case msg.TypeRefused:
		return nil, decodeRefusal(c, env), nil
	default:
		c.log.Error("the host answered advise with an unexpected frame", "type", env.T)
		return nil, nil, fmt.Errorf("unexpected %s frame", env.T)
	}
}

// decodeRefusal reads a refusal frame; one that does not decode is an
// internal refusal saying so.
func decodeRefusal(c *Controller, env *wire.Envelope) *msg.Refusal {
	var r msg.Refusal
	if err := env.Decode(&r); err != nil {
		c.log.Error("the host's refusal is malformed", "err", err)
		return &msg.Refusal{Code: msg.CodeInternal, Reason: "the host's refusal could not be read"}
	}
	return &r
}
