package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServedMethods are the requests the MCP server answers: the session's
// own (initialize, ping) and those of the one capability it declares,
// tools. go-sdk answers resources/list and prompts/list with empty lists
// whether or not those capabilities are declared; a client that asks for
// what was not declared is told the method is not found instead, as
// JSON-RPC has it.
var mcpServedMethods = map[string]bool{
	"initialize": true,
	"ping":       true,
	"tools/list": true,
	"tools/call": true,
}

// onlyDeclared is the server's receiving middleware: a request for a
// method outside mcpServedMethods is answered -32601 (method not found)
// and never reaches go-sdk's handlers. Notifications pass: they are not
// answered.
func onlyDeclared(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !mcpServedMethods[method] && !strings.HasPrefix(method, "notifications/") {
			// go-sdk answers any method-not-found error with its own
			// line, JSON-RPC's: `method not found: "resources/list"`.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("method %q is not served; this server declares the tools capability only", method)}
		}
		return next(ctx, method, req)
	}
}
