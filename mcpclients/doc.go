// Package mcpclients holds no code of steward's: its tests prove steward
// with MCP clients steward did not write, driving the real stack (package
// dev: the host, the controller and the reference application in one
// process, over their real sockets and journals) from Node.
//
//   - TestSDKJourney: the official TypeScript SDK's client
//     (@modelcontextprotocol/sdk) launches the keyless stdio proxy
//     (`steward-controller mcp --socket ...`) as an agent's MCP client
//     does, and walks an agent's journey: list, discover by search and by
//     address, call, replay, conflict, an application's refusal with
//     isError, an oversized line and a good call after it on the same
//     session (testdata/node/journey.mjs).
//   - TestConformance: the official conformance suite
//     (@modelcontextprotocol/conformance), server mode, against the
//     controller's streamable HTTP socket, behind a loopback TCP forwarder
//     (the suite takes a URL). The forwarder dials the socket as the test's
//     own account, which the dev stack names as its agent: it hides the
//     peer's credentials, in this test only. Every scenario that does not
//     need the suite's own test tools, prompts or resources runs and must
//     pass; conformance_test.go lists the rest and why each cannot apply.
//
// Both use one Node, 22 (the suite needs 22 or later), from the npm
// package node@22, pinned with the clients in testdata/node/package.json
// and package-lock.json (under testdata so that `go test ./...` never
// walks node_modules). .ci/run installs them with `npm ci` in that folder;
// by hand:
//
//	(cd mcpclients/testdata/node && npm ci)
//
// Without them each test skips, saying so, except under CI=true, where it
// fails.
package mcpclients
