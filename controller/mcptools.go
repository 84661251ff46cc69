package controller

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// serverInstructions is what the MCP server tells a client at initialize
// about using it: the three tools in the order an agent needs them.
const serverInstructions = `steward reaches the applications its operator routes to this controller, in three steps:
1. steward_overview: the applications you can reach now, and what the payer will still pay for your calls today.
2. oracle_discover: find an operation (a query; no application searches every one) and read its input schema and callPrice.
3. oracle_call: invoke it by application and operationId (or address "APPLICATION/OPERATION") with arguments valid against that schema and a requestId you choose; a retry with the same requestId and arguments answers the recorded result and is not charged again.
A result with isError true is not the application's success: read its outcome, status, body, refusal and detail.`

// newMCPServer builds the MCP server: exactly the three tools, with input
// schemas that carry the bounds of DESIGN.md section 8, and output schemas
// every answer (refusals included) validates against. The tools take the
// raw arguments (mcp.Server.AddTool, not the reflecting mcp.AddTool) so
// that numbers inside an invocation's arguments keep the bytes the agent
// sent: the typed path re-encodes them through float64. go-sdk checks
// neither the input nor the output of such a tool: decodeArgs and plan
// check the input, and the tests check every answer against its schema.
func (c *Controller) newMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward", Version: Version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Instructions: serverInstructions,
		Logger:       sdkLogger(c.log), // no session id in full (mcphttp_log.go)
	})
	s.AddReceivingMiddleware(onlyDeclared) // mcpmethods.go
	s.AddTool(overviewTool(), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, err := decodeArgs(req.Params.Arguments, &struct{}{}); err != nil {
			return toolError(err.Error()), nil
		}
		principal, _ := ctx.Value(principalKey{}).(string)
		return structured(c.overview(ctx, principal), "", false)
	})
	s.AddTool(c.discoverTool(), c.toolHandler(ToolDiscover))
	s.AddTool(c.callTool(), c.toolHandler(ToolCall))
	return s
}

// Annotations are hints a client may show or act on (auto-approving a
// read-only tool, asking before a destructive one); each says only what is
// true of every call of its tool.
var (
	// steward_overview reads: it journals, sends and charges nothing (the
	// host's answer about the agent's limits changes nothing either), and
	// its world is this controller and its host, which is closed.
	overviewAnnotations = &mcp.ToolAnnotations{
		Title:        "What steward can reach",
		ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false),
	}
	// oracle_discover is not read-only: each discovery is an attempt the
	// controller and the host journal, and it is charged where the
	// operator's price for discovery is set; so it is not idempotent
	// either (a repeat is another attempt, charged again). It only adds
	// records and reads the applications' catalogs, so not destructive;
	// its world is the applications the operator routes, a closed set.
	discoverAnnotations = &mcp.ToolAnnotations{
		Title:          "Find an application's operations",
		ReadOnlyHint:   false,
		IdempotentHint: false, DestructiveHint: new(false), OpenWorldHint: new(false),
	}
	// oracle_call runs whatever the operation does, which steward cannot
	// know: it may be destructive, and the application may reach the
	// world beyond steward. It is idempotent by requestId: the same
	// requestId and arguments answer the recorded result, neither sent
	// nor charged again.
	callAnnotations = &mcp.ToolAnnotations{
		Title:          "Invoke an operation",
		ReadOnlyHint:   false,
		IdempotentHint: true, DestructiveHint: new(true), OpenWorldHint: new(true),
	}
)

func overviewTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ToolOverview,
		Description: "List the applications this controller can reach, with their protocol and whether they are reachable now, " +
			"what the payer will still pay for your calls today, and what the operator's limits still allow you " +
			"(a call's price is in oracle_discover's answer as callPrice; its charge is in its result). Takes no arguments.",
		InputSchema:  map[string]any{"type": "object", "additionalProperties": false},
		OutputSchema: overviewOutputSchema(),
		Annotations:  overviewAnnotations,
	}
}

func (c *Controller) discoverTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ToolDiscover,
		Description: "Discover operations: search one application's with query, availability, limit and offset " +
			"(without an application, every application you may use is searched, and the matching addresses are answered), " +
			"or give application and operationId (or address) alone for one operation's descriptor, with its input schema. " +
			"Each application searched is an attempt the operator admits like a call, and may be charged; " +
			"the answer's callPrice is what an oracle_call of the operations it shows costs, in credits. " +
			"The application's answer is in body; isError is true unless the application answered 2xx.",
		InputSchema: map[string]any{
			"type": "object", "additionalProperties": false,
			"properties": map[string]any{
				"application": withDescription(applicationSchema(),
					"the application to search or describe, by name, as steward_overview lists it; "+
						"absent (and no address): every application you may use is searched"),
				"address": withDescription(addressSchema(),
					`one operation to describe, "APPLICATION/OPERATION" as a search's matches show it: `+
						"the same as application and operationId (give either; both must agree)"),
				"query": map[string]any{"type": "string", "maxLength": oracleops.MaxSearchBytes,
					"description": fmt.Sprintf("search text matched against operation ids, titles and descriptions, at most %d UTF-8 bytes; absent or empty: every operation", oracleops.MaxSearchBytes)},
				"availability": map[string]any{"type": "string", "enum": []string{"live_direct", "text_only", "unavailable", "any"},
					"description": "which operations to list: live_direct (callable now with oracle_call; the default), text_only, unavailable, or any"},
				"limit": map[string]any{"type": "integer", "minimum": oracleops.MinLimit, "maximum": oracleops.MaxLimit,
					"description": fmt.Sprintf("at most this many operations in the answer (default %d)", oracleops.DefaultLimit)},
				"offset": map[string]any{"type": "integer", "minimum": 0, "maximum": oracleops.MaxOffset,
					"description": "skip this many operations of one application's listing, to page through it (default 0; needs application)"},
				"operationId": withDescription(operationIDSchema(),
					"one operation to describe, by the id a search shows: query, availability, limit and offset must then be absent"),
				"timeoutMs": c.timeoutSchema(),
			},
		},
		OutputSchema: discoverOutputSchema(),
		Annotations:  discoverAnnotations,
	}
}

func (c *Controller) callTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ToolCall,
		Description: "Invoke one live_direct operation of an application, by application and operationId or by address. " +
			"requestId makes the call idempotent: the same requestId with the same arguments answers the recorded result " +
			"without calling the application or charging again. The application's answer is in body (with its status); " +
			"isError is true unless the application answered 2xx, and a refusal says why in refusal. " +
			"An operation the operator marked for approval waits inside the call for a while; " +
			"unanswered by then, the result is awaiting-approval (not an error): call again with the same requestId and arguments to collect the verdict.",
		InputSchema: map[string]any{
			"type": "object", "additionalProperties": false,
			"required": []string{"requestId", "conversationId", "arguments"},
			"properties": map[string]any{
				"application": withDescription(applicationSchema(),
					"the application to call, by name, as steward_overview lists it (with operationId; or give address)"),
				"address": withDescription(addressSchema(),
					`the operation to call, "APPLICATION/OPERATION" as oracle_discover's matches show it: `+
						"the same as application and operationId (give either; both must agree)"),
				"requestId": withDescription(idSchema(),
					fmt.Sprintf("an id you choose for this call, 1 to %d of A-Z a-z 0-9 _ -, new for each new call. "+
						"Calling again with the same requestId and the same arguments answers the recorded result (replayed: true) "+
						"without calling the application or charging again, so retrying after a lost answer is safe; "+
						"the same requestId with different arguments is refused (conflict)", oracleops.MaxIDLen)),
				"conversationId": withDescription(idSchema(),
					fmt.Sprintf("your own name for the task or conversation this call belongs to, 1 to %d of A-Z a-z 0-9 _ -: "+
						"keep it for every call of one task. The application receives it, and the operator's limits may count "+
						"credits per conversation and how many new conversations you start a day", oracleops.MaxIDLen)),
				"operationId": withDescription(operationIDSchema(),
					"the operation to invoke, by the id oracle_discover shows (with application; or give address)"),
				"arguments": map[string]any{"type": "object",
					"description": "the operation's arguments: one JSON object, valid against the input schema oracle_discover shows for it"},
				"timeoutMs": c.timeoutSchema(),
				"justification": map[string]any{"type": "string", "maxLength": msg.MaxJustification,
					"description": fmt.Sprintf("your own short reason for this call, one line of at most %d bytes: when the operator marked the operation "+
						"for approval, whoever answers its ask reads it", msg.MaxJustification)},
			},
		},
		OutputSchema: callOutputSchema(),
		Annotations:  callAnnotations,
	}
}

// withDescription adds a description to an input field's schema.
func withDescription(schema map[string]any, text string) map[string]any {
	schema["description"] = text
	return schema
}

// applicationSchema is an application's name. Which names exist is the
// host's route table's word, asked live (no enum: an application the
// operator activates later is callable without reconnecting).
func applicationSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1}
}

// addressSchema is an operation's address; its syntax is checked where
// addresses are parsed (tools.go's plan), not repeated here.
func addressSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 3}
}

// idSchema is a request or conversation id (oracleops.ValidateRequestID).
func idSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": oracleops.MaxIDLen, "pattern": "^[A-Za-z0-9_-]+$"}
}

// operationIDSchema is an operation id (oracleops.ValidateOperationID).
func operationIDSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": oracleops.MaxOperationIDLen, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$"}
}

func (c *Controller) timeoutSchema() map[string]any {
	return map[string]any{"type": "integer", "minimum": ctlconf.MinDispatchTimeoutMs, "maximum": c.cfg.MaxTimeoutMs(),
		"description": fmt.Sprintf("how long you will wait for this call, in ms (default %d): past it the host does not deliver it, "+
			"and a call still running then ends uncertain", c.cfg.DefaultTimeout().Milliseconds())}
}
