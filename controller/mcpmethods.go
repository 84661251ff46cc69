package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpUndeclared are the method prefixes of the capabilities the MCP
// server does not declare (it declares tools alone): go-sdk answers
// resources/list and prompts/list with empty lists whether or not those
// capabilities are declared; a client that asks for what was not declared
// is told the method is not found instead, as JSON-RPC has it. The rest
// (initialize, ping, tools/*, and the sessionless protocol's server/discover
// and subscriptions/listen) is go-sdk's to answer.
var mcpUndeclared = []string{"resources/", "prompts/", "completion/", "logging/"}

// onlyDeclared is the server's receiving middleware: a request for a
// method of an undeclared capability is answered -32601 (method not found)
// and never reaches go-sdk's handlers.
func onlyDeclared(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		for _, prefix := range mcpUndeclared {
			if strings.HasPrefix(method, prefix) {
				// go-sdk answers any method-not-found error with its own
				// line, JSON-RPC's: `method not found: "resources/list"`.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: fmt.Sprintf("method %q is not served; this server declares the tools capability only", method)}
			}
		}
		return next(ctx, method, req)
	}
}
