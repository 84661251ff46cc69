// Package crashtest is the stack's crash harness: TestCrash runs the three
// daemons (steward-operator serve, steward-controller serve,
// steward-appliance serve), built from cmd/ with `go build` and provisioned
// with the CLIs an operator types, as separate processes under load from N
// MCP clients, SIGKILLs a random daemon every 1-3 s and restarts it, and at
// the end accounts for every requestId through the three journals: the
// controller's (its begins and results), the host's (its receipts and the
// purse) and the application's (its answers, one per requestId).
//
// It fails on a lost call (issued, never answered definite, and nowhere in
// any journal), a call the application ran twice, a call charged twice, and
// on purse arithmetic that does not add up.
//
//	go test ./crashtest -run TestCrash -crash.duration=10m -crash.clients=8 -v
//
// Under `go test ./...` it runs for 5 s; with CI=true for 60 s (unless
// -crash.duration says otherwise). Every daemon runs as the account running
// the test: the harness does not create accounts.
package crashtest
