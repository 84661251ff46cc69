// Package controller is the controller: what agents talk to. It holds no
// authority of its own: it journals every call, consents to pay only for
// calls it journaled, and reaches applications only through the host
// (DESIGN.md sections 1, 2, 5 and 7).
//
// # Config
//
// JSON, decoded with unknown fields refused, one object:
//
//	{"name": "dev", "stateDir": "/var/lib/steward-controller", "keyDir": "/etc/steward-controller/keys",
//	 "bundle": "/etc/steward-controller/host.bundle",
//	 "sockets": {"mcp": "...", "reverse": "...", "foreground": "...", "mcpHTTP": "...", "advisor": "..."},
//	 "agents": {"uids": [1000], "gids": [995],
//	            "named": [{"name": "alice", "account": "alice"}, {"group": "steward-bots"}]},
//	 "foregroundUids": [0],
//	 "payer": {"maxPerCall": 10, "perDay": 1000, "principals": {"uid:1000": {"maxPerCall": 5, "perDay": 100}}}}
//
// agents says who may use the MCP socket and as which agent (DESIGN.md
// section 5, "Agents"): a {name, account} entry makes that account's uid
// the agent name, a {group} entry each member of the group an agent named
// after its account (resolved in the account database when the config is
// parsed, so at every start); a peer the legacy uids or gids admit is the
// agent "uid:N". A uid two entries match is refused when the config is
// parsed. The agent of a call is its MCP peer's SO_PEERCRED uid mapped so,
// never anything the agent writes.
//
// sockets.mcpHTTP is optional: when set, the controller also serves MCP
// over streamable HTTP on that socket, which it binds itself (never socket
// activation), with the MCP socket's peer check, caps and bounds
// (mcphttp.go); absent, nothing is served there. sockets.advisor is
// optional too: when set, the controller binds it itself and serves
// advisors there (advisor.go): a peer whose uid maps to a named agent that
// the host says is an advisor, with exactly the two tools steward_asks and
// steward_advise (advisor_tools.go) and no oracle tool.
//
// payer is the payer policy (DESIGN.md section 5): the controller consents
// to a charge only within the call's principal's limits (the agent of the
// MCP peer, "foreground" for the foreground socket), and without a policy
// to none. At most ctlconf.MaxPayerPrincipals overrides. The foreground
// never takes the defaults: it spends only within
// payer.foregroundAllowance {maxPerCall, perDay}, and without one a
// foreground oracle_call is refused before it is journaled, because the
// operator's account must not draw the payer's budget on its own.
//
// foregroundUids defaults to [0]. The config lists no applications: the
// host's active routes are the controller's applications, asked live on
// the host's control socket (the bundle's Bundle.Control) on every tool
// call that needs a route and every overview (liveroutes.go), so adding
// an application needs no enrollment. A config that still has toolTask or
// allowedApplicationLifetimeRoutes is refused saying so. The canonical form
// of the config file's bytes (canonjson.CanonicalJSON) is what the journal
// binds: a changed config refuses to start until it is enrolled
// (steward-installer controller-enroll); a reformatted one binds the same.
//
// # Keys
//
// KEYDIR holds controller.key, tool.key, dispatch.key and provider.key
// (wire COSE_Key files, 0600 in a 0700 directory) and controller.pub, the
// msg.ControllerKeys (CBOR) that `steward-operator controller add` pins.
// The tool key signs the forward channels (dispatch) and the control
// channel (routes, inspect, allowance); the dispatch key signs the reverse
// channel and every payer consent.
//
// # Journal
//
// STATEDIR/journal, owner "steward-controller", format
// "steward-controller-journal-v1". Its record kinds and bodies are package
// ledger's (controller/ledger), the one interpreter of that language, which
// the installer also reads. A begin no longer carries the tool's arguments
// beside the invoke body that contains them; begins written before that
// keep the field and still read.
//
// begin is durable before anything is sent, and names the call's agent
// (its principal), the agent's requestId and the scoped one, and the payer
// day it counts against; result is durable before the agent
// is answered, with the verified receipt's charge and what was consented.
// A payer consent gets no fsync of its own: the consents signed live in
// memory (with the bytes, to check the receipt against), and after a
// restart every begin without a result is uncertain (pending inspection),
// is never consented to again, and counts against its principal's day at
// the per-call ceiling. The receipt reaches the controller once, in the
// dispatch reply: it is verified against the pinned host key, the attempt
// and the consent, and its durable copy is the result record. A controller
// that missed the reply asks the host with inspect (attempts
// inspect|resolve).
//
// A call to an operation the operator marked for approval is answered by
// the host awaiting approval: the controller journals an awaiting record,
// parks the agent's call until the host pushes the verdict (or the ask's
// park window ends), then collects the attempt on the forward channel
// (approval.go); a call again with the same requestId collects the same
// attempt. Its consent is the one that is journaled (consented) before it
// leaves, so that after a restart such an attempt without one is awaiting
// approval, not uncertain, and may still be consented to once.
//
// At start the journal is iterated to rebuild the index: the open
// (pending, awaiting approval or uncertain) attempts, and per application the latest attempt
// of each requestId with its request hash, state and the sequence number
// of the record that holds its definite answer (read back from disk on a
// replay, so answers are not kept in memory).
//
// # Idempotence
//
// For oracle_call, an agent's requestId of an application decides (the
// index is keyed by agent, application and requestId: another agent's
// attempts decide nothing of it), and the application sees it scoped to
// the agent (ScopedRequestID, built into the invoke body; the
// conversationId too, ScopedConversationID): the same
// request hash with a definite earlier answer replays it (nothing
// dispatched or charged, replayed: true); a different hash is a conflict;
// an uncertain earlier attempt makes the call ask the host (inspect):
// what the host holds durably (an answer, not-sent, or its operator's
// release or charge with `steward-operator attempts resolve`) is journaled
// as the attempt's resolution (resolve.v2) and decides the call; a host
// that still reports it uncertain, or has not seen it, refuses the call
// until it is resolved (`steward-controller attempts resolve` abandons one
// the host never saw). After the operator's release the requestId answers
// "released by the operator: REASON; nothing was charged"; after the
// operator's charge, that it was performed and charged with its answer
// never recorded. A refused, not-sent or abandoned earlier attempt never
// reached the application: a new attempt may be made. Nothing is retried
// automatically.
//
// # Sockets
//
// The MCP socket (0660) admits a peer the config names as an agent
// (Config.AgentOf of its SO_PEERCRED uid and gid); another gets one
// JSON-RPC error line answering its first request and is closed.
// The reverse socket admits only the host's UID (from the bundle) and
// speaks signed frames (package wire). The foreground socket (0600)
// admits foregroundUids by SO_PEERCRED alone and speaks unsigned frames:
// a 4-byte big-endian length and deterministic CBOR of foreground.Request
// (at most wire.MaxRequestFrame bytes) answered by foreground.Reply (at
// most wire.MaxReplyFrame bytes). Its operations are submit, result, ack,
// attempts, inspect and resolve.
//
// # Proxy
//
// RunProxy (`steward-controller mcp`) passes JSON-RPC lines of at most
// MaxMCPLine bytes including the newline to the MCP socket as bytes, and
// answers a longer line with
//
//	{"jsonrpc":"2.0","id":ID,"error":{"code":-32600,"message":"steward mcp: request line of N bytes exceeds the bound of 65536 bytes including the newline"}}
//
// where ID is the line's own id, found by mcpproxy.IDScan as the line is
// drained (null when it has none that can be read). A line that is not JSON
// is answered with -32700 and id null, one nested past mcpproxy.MaxNesting
// with -32600 and its id; the session goes on. The MCP socket keeps the
// same bounds itself, exactly, for a peer that skips the proxy (mcpLines).
package controller
