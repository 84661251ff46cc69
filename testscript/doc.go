// Package testscript holds steward's acceptance journeys: scripts under
// testdata/*.txtar, run by github.com/rogpeppe/go-internal/testscript against
// the real commands (steward-operator, steward-controller, steward-appliance,
// steward-dev, steward-installer) as separate processes talking over real Unix
// sockets with signed frames and fsync'd journals. Nothing is short-circuited.
//
// The package has no API; `go test ./testscript/` runs the journeys. See the
// test files for the commands a journey may use beyond testscript's own:
//
//	waitfor socket|file PATH [TIMEOUT]  bounded wait for a socket that accepts, or a non-empty file
//	! waitfor socket|file PATH          bounded wait for PATH to be gone
//	mcp-call SOCKET TOOL JSON-ARGS      one tools/call through `steward-controller mcp`
//	mcp-list SOCKET                     tools/list through the proxy
//	mcp-raw SOCKET LINE...              raw JSON-RPC lines through the proxy (@pad=N:JSON pads to N bytes)
//	repeat VAR TEXT N                   VAR = TEXT repeated N times
//	jsonenv FILE VAR=PATH...            set variables from a JSON document
//	httpunix SOCKET METHOD PATH [BODY]  one HTTP request to an application socket
//
// and the condition [root].
package testscript
