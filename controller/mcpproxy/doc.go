// Package mcpproxy is `steward-controller mcp`: the keyless stdio proxy that
// runs in an agent's account, between the agent's MCP client and the
// controller's MCP socket. It is a package of its own so that the only code
// that runs as the agent cannot reach the controller's keys, journal or
// config: it imports the standard library and golang.org/x/sys alone
// (internal/deps holds it to that).
package mcpproxy
