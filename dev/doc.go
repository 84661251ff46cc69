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
// Without --state the state directory is DefaultStateDir,
// $XDG_STATE_HOME/steward-dev or ~/.local/state/steward-dev, the same one
// at every start; --once without --state uses a new temporary directory
// under $TMPDIR instead, never the default, and removes it at the end
// unless --keep. A state directory holds:
//
//	STATE/                    0700
//	  operator/               the operator store (package operator): the
//	                          operator's hybrid key and the host journal
//	  controller/             the controller's state dir (its journal)
//	    keys/                 its four role keys and controller.pub
//	    config.json           its config (package controller's shape)
//	    host.bundle           the bundle the operator built for it
//	  appliance/              the reference application's journal
//	  route-request.json      the route request the operator registered
//	  dev.json                where a client finds the running stack
//
// Each journal is created with JournalSegmentSize (4 MiB), which it records
// and keeps, so a state directory takes about 13 MB rather than the 193 MB
// of three production-sized (64 MiB) journals. Stopped, `rm -rf STATE`
// removes everything of a stack but its socket directory, which the stack
// removes itself when it stops.
//
// # Sockets
//
// A socket path must fit the 107 bytes of a Unix socket address, which a
// state under a long home directory or $TMPDIR would not, so the sockets
// are in a short runtime directory of their own, RUN:
//
//	RUN/                      0700, owned by the user, removed at a clean stop
//	  appliance.sock          the application (the host's upstream)
//	  route-appliance.sock    the host's route listener (forward)
//	  reverse.sock            the controller's custody socket
//	  mcp.sock                the controller's MCP socket (agents)
//	  foreground.sock         the controller's foreground socket
//	  admin.sock              the host's admin socket
//
// RUN is $XDG_RUNTIME_DIR/steward-dev for the default state, else
// /tmp/steward-dev-UID; another state adds "-" and 12 hex digits of the
// SHA-256 of its path, so that stacks of different states never share one.
// A RUN that is a symbolic link, not a directory, owned by another account
// or of a mode other than 0700 is refused (in /tmp another account could
// have made it first). RUN is chosen at the first start; the route record
// the host signs names the socket paths and the controller's journal is
// bound to its config, so later starts take RUN from the config, whatever
// XDG_RUNTIME_DIR says then. The host's admin socket is not in the
// operator store, where `steward-operator --store` looks for a running
// host: while the stack runs, that command's read-only verbs work and the
// others wait for the stack to stop.
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
//	 "controller_state": DIR, "appliance_socket": PATH, "admin_socket": PATH}
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
