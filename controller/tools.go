package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// Tool names: the whole MCP surface.
const (
	ToolOverview = "steward_overview"
	ToolDiscover = "oracle_discover"
	ToolCall     = "oracle_call"
)

// ErrArguments is wrapped by every refusal of a tool's arguments. Such a
// refusal journals nothing and sends nothing.
var ErrArguments = errors.New("arguments refused")

// CallArgs are the arguments of oracle_call.
type CallArgs struct {
	Application    string          `json:"application"`
	RequestID      string          `json:"requestId"`
	ConversationID string          `json:"conversationId"`
	OperationID    string          `json:"operationId"`
	Arguments      json.RawMessage `json:"arguments"`
	// TimeoutMs is how long the agent will wait for the call, at most the
	// config's dispatch.maxTimeoutMs; absent, the config's default.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
}

// DiscoverArgs are the arguments of oracle_discover: a search, or one
// operation by id.
type DiscoverArgs struct {
	Application  string  `json:"application"`
	Query        *string `json:"query,omitempty"`
	Availability *string `json:"availability,omitempty"`
	Limit        *int    `json:"limit,omitempty"`
	Offset       *int    `json:"offset,omitempty"`
	OperationID  *string `json:"operationId,omitempty"`
	TimeoutMs    *int64  `json:"timeoutMs,omitempty"` // as CallArgs.TimeoutMs
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
	conversationID string
	req            oracleops.Request
	sha            [32]byte
	route          msg.RouteRecord
	principal      string // the agent that makes the call, and the payer's principal (Config.AgentOf, ctlconf.PrincipalForeground)
	// timeout is how long the call may take: its dispatch's deadline is
	// this long after the controller took it.
	timeout time.Duration
}

// timeout is the agent's timeoutMs checked against the config's maximum,
// or the config's default when it named none.
func (c *Controller) timeout(ms *int64) (time.Duration, error) {
	if ms == nil {
		return c.cfg.DefaultTimeout(), nil
	}
	if max := c.cfg.MaxTimeoutMs(); *ms < 1 || *ms > max {
		return 0, argErr("timeoutMs: %d is outside 1 to %d ms", *ms, max)
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func argErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrArguments, fmt.Sprintf(format, a...))
}

// decodeArgs canonicalizes raw (refusing bad JSON and duplicate keys) and
// decodes it strictly into v (unknown fields refused).
func decodeArgs(raw []byte, v any) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	canon, err := oracleops.CanonicalJSON(raw)
	if err != nil {
		return nil, argErr("%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, argErr("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, argErr("data after the arguments object")
	}
	return canon, nil
}

// plan validates a tool call of agent against the bounds of DESIGN.md
// section 8 and builds the exact request: an invoke carries the agent's
// scoped requestId (ScopedRequestID). Nothing is journaled before it
// succeeds.
func (c *Controller) plan(ctx context.Context, tool string, raw []byte, agent string) (*plan, error) {
	switch tool {
	case ToolCall:
		var a CallArgs
		canon, err := decodeArgs(raw, &a)
		if err != nil {
			return nil, err
		}
		route, err := c.routeOf(ctx, a.Application)
		if err != nil {
			return nil, err
		}
		timeout, err := c.timeout(a.TimeoutMs)
		if err != nil {
			return nil, err
		}
		if a.Arguments == nil {
			return nil, argErr("arguments: missing, must be a JSON object")
		}
		// The agent's requestId is checked as the protocol's id before it
		// is hashed into the scoped one, which always passes.
		if err := oracleops.ValidateRequestID(a.RequestID); err != nil {
			return nil, argErr("%v", err)
		}
		scoped := ScopedRequestID(agent, a.RequestID)
		req, err := oracleops.BuildInvoke(route.Prefix, oracleops.InvokeBody{
			Arguments: a.Arguments, ConversationID: a.ConversationID,
			OperationID: a.OperationID, RequestID: scoped,
		})
		if err != nil {
			return nil, argErr("%v", err)
		}
		if err := oracleops.ValidateInvokeSize(len(req.Body), c.requestBytes(a.Application)); err != nil {
			return nil, argErr("%v", err)
		}
		return &plan{tool: tool, args: canon, application: a.Application, kind: msg.KindInvoke,
			operation: a.OperationID, requestID: a.RequestID, scopedID: scoped, conversationID: a.ConversationID,
			req: req, sha: req.SHA256(), route: route, timeout: timeout, principal: agent}, nil
	case ToolDiscover:
		var a DiscoverArgs
		canon, err := decodeArgs(raw, &a)
		if err != nil {
			return nil, err
		}
		route, err := c.routeOf(ctx, a.Application)
		if err != nil {
			return nil, err
		}
		timeout, err := c.timeout(a.TimeoutMs)
		if err != nil {
			return nil, err
		}
		p := &plan{tool: tool, args: canon, application: a.Application, route: route, timeout: timeout, principal: agent}
		if a.OperationID != nil {
			if a.Query != nil || a.Availability != nil || a.Limit != nil || a.Offset != nil {
				return nil, argErr("operationId names one operation: query, availability, limit and offset must be absent")
			}
			p.req, err = oracleops.BuildDescribe(route.Prefix, *a.OperationID)
			p.kind, p.operation = msg.KindDescribe, *a.OperationID
		} else {
			q := oracleops.ListQuery{}
			if a.Query != nil {
				q.Query = *a.Query
			}
			if a.Availability != nil {
				q.Availability = oracleops.Availability(*a.Availability)
				if q.Availability == "" {
					return nil, argErr("availability: empty, must be one of live_direct, text_only, unavailable, any")
				}
			}
			if a.Limit != nil {
				if err := oracleops.ValidateLimit(*a.Limit); err != nil {
					return nil, argErr("%v", err)
				}
				q.Limit = *a.Limit
			}
			if a.Offset != nil {
				q.Offset = *a.Offset
			}
			p.req, err = oracleops.BuildList(route.Prefix, q)
			p.kind, p.query = msg.KindList, q.Query
		}
		if err != nil {
			return nil, argErr("%v", err)
		}
		p.sha = p.req.SHA256()
		return p, nil
	default:
		return nil, argErr("unknown tool %q", tool)
	}
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
