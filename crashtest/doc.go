// Package crashtest is the stack's crash harness: TestCrash runs the three
// daemons (steward-operator serve, steward-controller serve,
// steward-appliance serve), built from cmd/ with `go build` and provisioned
// with the CLIs an operator types, as separate processes under load from N
// MCP clients (go-sdk sessions over the controller's MCP socket), SIGKILLs a
// random daemon every 1-3 s and restarts it, waiting for its READY=1 on a
// NOTIFY_SOCKET (the appliance's "ready" line). Each client calls with fresh
// requestIds and retries the same requestId after an error or an unfinished
// answer, as an agent does.
//
// When the time is up the harness resolves every attempt the controller
// lists uncertain (`steward-controller attempts resolve`), retries every
// requestId still without a definite answer once, stops the daemons, and
// accounts for every requestId through the three journals: the
// controller's (its begins, results and resolutions), the host's (the
// receipts of its outcome records, `receipts verify --json`, `purse show
// --json`) and the application's (its answers, by requestId). It fails on
// a lost call (never definite and in no journal, or definite with no
// application answer or receipt), a requestId the application answered
// twice, one charged twice, a purse that does not add up (funded = balance
// + charged; charged = the receipts' charges + the reservations still
// held, each at the grant's price), any other finding of receipts verify,
// and a daemon that exited by itself. An attempt the host holds uncertain
// (killed while the application was answering) cannot be resolved from
// the controller: it is counted as unfinished, its reservation as held.
//
//	go test ./crashtest -run TestCrash -v -timeout 30m -crash.duration=10m -crash.clients=8
//
// Under `go test ./...` it runs for 5 s; with CI=true for 60 s (unless
// -crash.duration says otherwise). Run as root, each daemon runs under an
// account of its own (internal/testaccount: stwt- names, removed when the
// test ends, even when it fails), as in an installation: each owns its
// files (0700; the operator hands the controller's public keys and the
// host's bundle across, as an installer does), every command runs as its
// daemon's account, and each socket directory is setgid 2750 to the group
// of the daemon that connects (the application's to the host, the host's
// forward socket to the controller, the controller's reverse socket to the
// host), so the 0660 sockets let exactly that peer in; the host is pinned
// to the controller's uid, and the appliance serves the host by its group.
// The MCP clients are the test process, the controller's agent. Otherwise
// every daemon runs as the account running the test. A run in which no
// call was ever answered definite fails: it would prove nothing.
package crashtest
