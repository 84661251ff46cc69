// Package dev is steward's development mode, `steward-dev`: the host, the
// controller and the reference application in one process under the
// current user, for trying steward and for tests. Nothing is short-circuited:
// each part has its own state directory, keys, journal and sockets, and they
// talk over the same Unix sockets and signed frames as in production. What
// differs is that one account runs all three and every key is on local disk,
// which Run says plainly.
//
// # State directory
//
//	STATE/                    0700
//	  operator/               the operator store (package operator): the
//	                          operator's hybrid key, the host journal, and
//	                          admin.sock while the host runs
//	  controller/             the controller's state dir (its journal)
//	    keys/                 its four role keys and controller.pub
//	    config.json           its config (package controller's shape)
//	    host.bundle           the bundle the operator built for it
//	  appliance/              the reference application's journal
//	  route-request.json      the route request the operator registered
//	  run/                    0700, the sockets while it runs:
//	    appliance.sock        the application (the host's upstream)
//	    route-appliance.sock  the host's route listener (forward)
//	    reverse.sock          the controller's custody socket
//	    mcp.sock              the controller's MCP socket (agents)
//	    foreground.sock       the controller's foreground socket
//	  dev.json                where a client finds the running stack
//
// A socket path must fit the 107 bytes of a Unix socket address, and package
// wire binds a listening socket through DIR/.bind-NNNNNNNNNN/s first, so a
// directory holding a listening socket may be at most 88 bytes. The operator
// store holds the host's admin socket and must stay where it is (the route
// record signs the socket paths, the controller's journal is bound to its
// config), so a STATE of more than 79 bytes is refused with that reason.
//
// # Provisioning
//
// On first start: the operator store, the controller's keys, the controller
// pinned with the current UID, its purse funded with 1,000,000 credits, a
// grant for the reference application at 1 credit a call and 100,000 calls a
// day (valid a year; a later start issues a new one once it expires), the
// route "appliance", the bundle and the controller config, whose agent
// allow-list and foreground UIDs are the current UID. Later starts check and
// reuse all of it; a moved state directory is refused.
//
// # dev.json
//
//	{"mcp_socket": PATH, "foreground_socket": PATH, "operator_store": DIR,
//	 "controller_state": DIR, "appliance_socket": PATH}
//
// written atomically once the three parts are ready.
//
// # The demonstration (--once)
//
// Through the MCP socket with a go-sdk client, as an agent: steward_overview,
// oracle_discover of "calc", oracle_call of calc.evaluate on
// "3 * 687 / 365.25" (2748/487), and the same call again, which must be
// answered from the journal with the same receipt and no charge. Each step
// prints its receipt and the purse balance; then the stack stops and every
// receipt is verified (signatures, chain, checkpoints, purse arithmetic),
// the exported chain once more against the operator's public key.
package dev
