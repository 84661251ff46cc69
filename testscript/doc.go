// Package testscript holds steward's acceptance journeys: scripts under
// testdata/*.txtar, run by github.com/rogpeppe/go-internal/testscript against
// the real commands as separate processes, talking over real Unix sockets
// with signed frames and fsync'd journals. Nothing is short-circuited.
//
// The package has no API; `go test ./testscript/` registers steward-operator,
// steward-controller, steward-installer, steward-appliance and steward-dev
// with testscript.Main (each as its cmd main runs it; see TestMain), so that
// a journey's `exec` runs the test binary as that command in a process of
// its own, with -race when the tests have it, and runs the journeys:
//
//	appliance  the reference application alone over its socket: discovery, invoke, replay
//	           (also after a restart), conflict, its own refusals
//	dev        steward-dev --once, and its receipts verified; a second start reuses the state;
//	           --once without --state in a temporary directory, removed (--keep keeps it); the
//	           default state served, interrupted and restarted; sockets in XDG_RUNTIME_DIR
//	call       the stack as separate daemons provisioned with the operator's and controller's
//	           commands: tools/list (exactly three), discover, call, replay without a second
//	           charge, conflict, an application's own refusal, receipts verified and exported
//	bounds     every bound an agent reaches, at the limit and one past, through the proxy
//	           (the invocation body straight over the MCP socket), nothing journaled past one
//	restart    every daemon stopped cleanly and by SIGKILL and restarted: replays, purse and
//	           receipts unchanged, new calls work
//	uncertain  the host killed at host-after-mark-send and host-after-outcome: the attempt is
//	           uncertain, its requestId refused, attempts inspect and resolve, charged once
//	resolve    the host killed after mark-send three times; the operator lists, inspects and
//	           resolves each attempt (redeliver, release, charge) with steward-operator; the
//	           controller learns it (the agent's next call, its attempts resolve) and the
//	           requestId answers it; receipts verify after each; a 4xx charged 0; a timeoutMs
//	           one past the controller's maximum refused with nothing reserved
//	accounts   (root) each daemon under its own account; the controller cannot read the
//	           operator store; the wrong account is refused on every socket; the call
//	           journey as an agent account
//
// Each journey's $WORK, and the shared and notify directories, are under
// /tmp rather than $TMPDIR (shortTempRoot), because the journeys bind Unix
// sockets there and a socket path is at most 107 bytes: the journeys pass
// with a $TMPDIR of any length. XDG_STATE_HOME and XDG_RUNTIME_DIR point
// into $WORK, so steward-dev's default state and sockets stay inside the
// journey.
//
// TestReadme runs the README's commands as written. TestCommandsAreTheMains
// checks that each registered command runs exactly its cmd main's statements.
//
// Commands a journey may use beyond testscript's own:
//
//	waitfor socket|file PATH [TIMEOUT]   bounded wait for a socket that accepts, or a non-empty regular file
//	! waitfor socket|file PATH           bounded wait for PATH to be gone
//	notify NAME                          an sd_notify socket; sets NOTIFY_SOCKET for what follows
//	waitfor ready NAME                   bounded wait for READY=1 on it
//	mcp-call [-direct] [-as USER] SOCKET TOOL JSON-ARGS
//	                                     one tools/call through `steward-controller mcp`
//	mcp-list [-as USER] SOCKET           tools/list through the proxy
//	mcp-raw [-as USER] SOCKET LINE...    raw JSON-RPC lines through the proxy (@pad=N:JSON)
//	repeat VAR TEXT N                    VAR = TEXT repeated N times
//	jsonenv FILE VAR=PATH...             set variables from a JSON document
//	expand FILE...                       substitute $VAR in files
//	httpunix SOCKET METHOD PATH [BODY]   one HTTP request to an application socket
//	account VAR NAME [GROUP...]          (root) a system account, removed at the end
//	group VAR NAME                       (root) a system group, removed at the end
//	mkshared VAR                         a 0755 directory every account can reach
//	mkdirown PATH USER:GROUP MODE        (root) a directory with owner and mode
//	cpown SRC DST USER:GROUP MODE        (root) a copy with owner and mode
//	dial-as USER[:GROUP,...] SOCKET      (root) connect as another account, print the answer
//
// and the condition [root].
package testscript
