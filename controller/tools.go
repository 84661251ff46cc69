package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// Tool names: the whole MCP surface.
const (
	ToolOverview = "steward_overview"
	ToolDiscover = foreground.ToolDiscover
	ToolCall     = foreground.ToolCall
)

// ErrArguments is wrapped by every refusal of a tool's arguments. Such a
// refusal journals nothing and sends nothing.
var ErrArguments = errors.New("arguments refused")

// CallArgs are the arguments of oracle_call. The operation is named by
// Address, or by Application and OperationID, or by both when they agree.
type CallArgs struct {
	Address        string          `json:"address,omitempty"` // APPLICATION/OPERATION or NODE/APPLICATION/OPERATION (address.go)
	Application    string          `json:"application"`
	RequestID      string          `json:"requestId"`
	ConversationID string          `json:"conversationId"`
	OperationID    string          `json:"operationId"`
	Arguments      json.RawMessage `json:"arguments"`
	// TimeoutMs is how long the agent will wait for the call, at most the
	// config's dispatch.maxTimeoutMs; absent, the config's default.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// Justification is the agent's own short reason for the call, shown
	// to whoever answers its ask when the operation is marked for
	// approval (at most msg.MaxJustification bytes, one line).
	Justification string `json:"justification,omitempty"`
}

// DiscoverArgs are the arguments of oracle_discover: a search of one
// application, one operation by id or by address, or, with neither
// application nor address, a search across every application
// (search.go).
type DiscoverArgs struct {
	Address      string  `json:"address,omitempty"` // as CallArgs.Address: describes that operation
	Application  string  `json:"application"`
	Query        *string `json:"query,omitempty"`
	Availability *string `json:"availability,omitempty"`
	Limit        *int    `json:"limit,omitempty"`
	Offset       *int    `json:"offset,omitempty"`
	OperationID  *string `json:"operationId,omitempty"`
	TimeoutMs    *int64  `json:"timeoutMs,omitempty"` // as CallArgs.TimeoutMs
}

// acrossApplications reports whether a asks for a search across
// applications: it names no application, address or operation.
func (a *DiscoverArgs) acrossApplications() bool {
	return a.Application == "" && a.Address == "" && a.OperationID == nil
}

// plan is a validated tool call: everything begin records and dispatch sends.
type plan struct {
	tool           string
	args           []byte // canonical JSON of the tool arguments
	application    string
	kind           string
	operation      string
	query          string
	requestID      string // the agent's
	scopedID       string // the application's (ScopedRequestID), for an invoke
	conversationID string // the agent's
	scopedConv     string // the application's (ScopedConversationID), for an invoke
	req            oracleops.Request
	sha            [32]byte
	route          msg.RouteRecord
	principal      string // the agent that makes the call, and the payer's principal (Config.AgentOf, ctlconf.PrincipalForeground)
	// offline: the host could not be asked for the route, and route is
	// what an earlier attempt with this requestId recorded of it
	// (recordedRoute). Such a plan may only be decided by that attempt:
	// dispatch sends nothing for it.
	offline bool
	// timeout is how long the call may take: its dispatch's deadline is
	// this long after the controller took it (or, for a collect of an
	// attempt awaiting approval, after the collect).
	timeout time.Duration
	// justification is the agent's reason for an invocation (CallArgs).
	justification string
	// ask is the ask the attempt awaits or awaited, once it is known: its
	// receipt must name it.
	ask string
}

// begin is attempt id of p as its begin record has it, but for what the
// dispatch adds when it journals it (the foreground request, the payer's
// day, the deadline): the one place a plan is read as the call it makes,
// for the record and for the checks of the host's receipt of it.
func (p *plan) begin(id string) ledger.Begin {
	return ledger.Begin{
		Attempt: id, Tool: p.tool, Application: p.application, Operation: p.operation,
		RequestID: p.requestID, ScopedRequestID: p.scopedID, ConversationID: p.conversationID, ScopedConversationID: p.scopedConv,
		Kind: p.kind, Method: p.req.Method, Path: p.req.Path, Body: p.req.Body,
		RequestSHA256: p.sha[:], Route: p.route.Route,
		Principal: p.principal, Agent: p.principal, Justification: p.justification,
	}
}

// timeout is the agent's timeoutMs checked against the bounds (at least
// the host's deadline tolerance, at most the config's maximum), or the
// config's default when it named none.
func (c *Controller) timeout(ms *int64) (time.Duration, error) {
	if ms == nil {
		return c.cfg.DefaultTimeout(), nil
	}
	if max := c.cfg.MaxTimeoutMs(); *ms < ctlconf.MinDispatchTimeoutMs || *ms > max {
		return 0, argErr("timeoutMs: %d is outside %d to %d ms (the host holds a deadline only to within %d ms)",
			*ms, ctlconf.MinDispatchTimeoutMs, max, ctlconf.MinDispatchTimeoutMs)
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func argErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrArguments, fmt.Sprintf(format, a...))
}

// decodeArgs canonicalizes raw (refusing bad JSON and duplicate keys) and
// decodes it strictly into v: one JSON object, no field v does not have
// (by its exact name), each of its type. Every refusal is in steward's
// words (argwords.go), never the decoder's. Arguments absent or null are
// no arguments, as the decoder has always read null: a client may send
// null for a tool that takes none.
func decodeArgs(raw []byte, v any) ([]byte, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		raw = []byte("{}")
	}
	canon, err := oracleops.CanonicalJSON(raw)
	if err != nil {
		return nil, canonWords(err)
	}
	if canon[0] != '{' {
		return nil, argErr("the tool's arguments must be a JSON object, not %s", jsonKind(canon))
	}
	if err := checkArgFields(canon, v); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, decodeWords(err, canon)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, argErr("data after the arguments object")
	}
	return canon, nil
}

// plan validates a tool call of agent against the bounds of DESIGN.md
// section 8 and builds the exact request: an invoke carries the agent's
// scoped requestId (ScopedRequestID). Nothing is journaled before it
// succeeds. A search across applications is not one request: the MCP
// tool runs it (search.go), and plan refuses it.
func (c *Controller) plan(ctx context.Context, tool string, raw []byte, agent string) (*plan, error) {
	switch tool {
	case ToolCall:
		var a CallArgs
		canon, err := decodeArgs(raw, &a)
		if err != nil {
			return nil, err
		}
		return c.planCall(ctx, canon, a, agent)
	case ToolDiscover:
		var a DiscoverArgs
		canon, err := decodeArgs(raw, &a)
		if err != nil {
			return nil, err
		}
		if a.acrossApplications() {
			return nil, argErr("application: missing: a search across applications is an MCP oracle_discover; here give application or address")
		}
		return c.planDiscover(ctx, canon, a, agent)
	default:
		return nil, argErr("unknown tool %q", tool)
	}
}

// planCall plans an oracle_call.
func (c *Controller) planCall(ctx context.Context, canon []byte, a CallArgs, agent string) (*plan, error) {
	var op *string
	if a.OperationID != "" {
		op = &a.OperationID
	}
	app, op, err := c.target(a.Address, a.Application, op)
	if err != nil {
		return nil, err
	}
	if app == "" {
		return nil, argErr("application: missing: give address (APPLICATION/OPERATION), or application and operationId")
	}
	var opID string
	if op != nil {
		opID = *op
	}
	timeout, err := c.timeout(a.TimeoutMs)
	if err != nil {
		return nil, err
	}
	if a.Arguments == nil {
		return nil, argErr("arguments: missing, must be a JSON object")
	}
	// The arguments are checked before the route's lookup, a round trip
	// to the host: a refusal of them costs nothing and reads the same
	// whether the host is up or not.
	// The agent's requestId is checked as the protocol's id before it
	// is hashed into the scoped one, which always passes.
	if err := oracleops.ValidateRequestID(a.RequestID); err != nil {
		return nil, argErr("%v", err)
	}
	if err := checkJustification(a.Justification); err != nil {
		return nil, err
	}
	route, err := c.routeOf(ctx, app)
	offline := false
	if err != nil {
		// A host that cannot be reached for the route does not keep an
		// agent from its recorded answer: an earlier attempt with this
		// requestId that decides the call needs no route (recordedRoute).
		var ue *unavailableError
		r, ok := c.recordedRoute(agent, app, a.RequestID)
		if !errors.As(err, &ue) || !ok {
			return nil, err
		}
		route, offline = r, true
	}
	// The agent's conversationId is checked as the protocol's id before
	// it is hashed into the scoped one, as its requestId is.
	if err := oracleops.ValidateConversationID(a.ConversationID); err != nil {
		return nil, argErr("%v", err)
	}
	scoped, scopedConv := ScopedRequestID(agent, a.RequestID), oracleops.ScopedConversationID(agent, a.ConversationID)
	req, err := oracleops.BuildInvoke(route.Prefix, oracleops.InvokeBody{
		Arguments: a.Arguments, ConversationID: scopedConv,
		OperationID: opID, RequestID: scoped,
	})
	if err != nil {
		return nil, argErr("%v", err)
	}
	if err := oracleops.ValidateInvokeSize(len(req.Body), c.requestBytes(app)); err != nil {
		return nil, argErr("%v", err)
	}
	return &plan{tool: ToolCall, args: canon, application: app, kind: msg.KindInvoke,
		operation: opID, requestID: a.RequestID, scopedID: scoped, conversationID: a.ConversationID, scopedConv: scopedConv,
		req: req, sha: req.SHA256(), route: route, timeout: timeout, principal: agent, offline: offline,
		justification: a.Justification}, nil
}

// recordedRoute is the route an earlier attempt of agent's requestID on
// app was built with, as far as a replay needs it (its name and prefix),
// when that attempt decides a new call with the same requestId without
// anything being sent (ledger.Decided). Only the route's prefix goes into
// the request, so the new call's request hash is compared with the
// recorded one as when the host answers; dispatch refuses a plan made so
// that would begin a new attempt after all (plan.offline).
func (c *Controller) recordedRoute(agent, app, requestID string) (msg.RouteRecord, bool) {
	path, name, ok := c.led.Decided(agent, app, requestID)
	prefix, cut := strings.CutSuffix(path, "/invoke")
	if !ok || !cut {
		return msg.RouteRecord{}, false
	}
	return msg.RouteRecord{Route: name, Application: app, Prefix: prefix}, true
}

// planDiscover plans an oracle_discover of one application: a search of
// its operations, or one operation's descriptor.
func (c *Controller) planDiscover(ctx context.Context, canon []byte, a DiscoverArgs, agent string) (*plan, error) {
	app, op, err := c.target(a.Address, a.Application, a.OperationID)
	if err != nil {
		return nil, err
	}
	if app == "" {
		return nil, argErr("application: missing: operationId names an operation of one application; give application too, or address")
	}
	// The arguments are checked before the route's lookup, a round trip
	// to the host (planCall).
	timeout, err := c.timeout(a.TimeoutMs)
	if err != nil {
		return nil, err
	}
	if op == nil {
		q, err := listQuery(a)
		if err != nil {
			return nil, err
		}
		route, err := c.routeOf(ctx, app)
		if err != nil {
			return nil, err
		}
		return listPlan(route, canon, q, timeout, agent)
	}
	if a.Query != nil || a.Availability != nil || a.Limit != nil || a.Offset != nil {
		named := "operationId"
		if a.Address != "" {
			named = "address"
		}
		return nil, argErr("%s names one operation: query, availability, limit and offset must be absent", named)
	}
	route, err := c.routeOf(ctx, app)
	if err != nil {
		return nil, err
	}
	req, err := oracleops.BuildDescribe(route.Prefix, *op)
	if err != nil {
		return nil, argErr("%v", err)
	}
	return &plan{tool: ToolDiscover, args: canon, application: app, kind: msg.KindDescribe, operation: *op,
		req: req, sha: req.SHA256(), route: route, timeout: timeout, principal: agent}, nil
}

// listQuery is the search a discovery asks for, its fields checked.
func listQuery(a DiscoverArgs) (oracleops.ListQuery, error) {
	q := oracleops.ListQuery{}
	if a.Query != nil {
		q.Query = *a.Query
	}
	if a.Availability != nil {
		q.Availability = oracleops.Availability(*a.Availability)
		if q.Availability == "" {
			return q, argErr("availability: empty, must be one of live_direct, text_only, unavailable, any")
		}
	}
	if a.Limit != nil {
		if err := oracleops.ValidateLimit(*a.Limit); err != nil {
			return q, argErr("%v", err)
		}
		q.Limit = *a.Limit
	}
	if a.Offset != nil {
		q.Offset = *a.Offset
	}
	// Checked here, before any route is looked up or anything journaled,
	// as BuildList checks them again: a query every application would
	// refuse is refused once.
	if err := oracleops.ValidateQuery(q.Query); err != nil {
		return q, argErr("%v", err)
	}
	if q.Availability != "" {
		if err := oracleops.ValidateAvailabilityFilter(q.Availability); err != nil {
			return q, argErr("%v", err)
		}
	}
	return q, nil
}

// listPlan is the listing q of route's application, for agent: one
// application's search, alone or as one part of a search across
// applications. canon is what the agent sent.
func listPlan(route msg.RouteRecord, canon []byte, q oracleops.ListQuery, timeout time.Duration, agent string) (*plan, error) {
	req, err := oracleops.BuildList(route.Prefix, q)
	if err != nil {
		return nil, argErr("%v", err)
	}
	return &plan{tool: ToolDiscover, args: canon, application: route.Application, kind: msg.KindList, query: q.Query,
		req: req, sha: req.SHA256(), route: route, timeout: timeout, principal: agent}, nil
}

// requestBytes is the application's own limits.request_bytes, 0 until a
// listing has announced it.
func (c *Controller) requestBytes(app string) int {
	if v, ok := c.limits.Load(app); ok {
		return v.(int)
	}
	return 0
}

// learnLimits records limits.request_bytes from a successful listing.
func (c *Controller) learnLimits(app string, body []byte) {
	var lr struct {
		Limits oracleops.Limits `json:"limits"`
	}
	if json.Unmarshal(body, &lr) == nil && lr.Limits.RequestBytes > 0 {
		c.limits.Store(app, lr.Limits.RequestBytes)
	}
}
