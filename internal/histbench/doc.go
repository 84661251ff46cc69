// Package histbench is the measuring stick of the cost of history (issue
// P2.2, DESIGN.md section 13, docs/HISTORY.md): a generator that fills a
// steward-dev state with N calls' real records, and a measurement of what
// that history costs each daemon at start: time, CPU, memory and disk. It
// owns nothing the daemons run: it drives their own code and reads what
// they write, so that the figures before and after P2.2 come from one tool.
//
// # The generator (Generate)
//
// It provisions a dev state with package dev's own first start (dev.Run),
// funds the purse and marks one operation for approval through the
// operator's store, then runs the three daemons as child processes on that
// state: the reference appliance as the real steward-appliance binary, the
// host and the controller as host.Serve and controller.Serve in a child of
// the generator's own binary (histgen daemon host|controller), the same
// code their commands run, with one difference: their wall clock
// (ServeOptions.Now, Options.Now) is the machine's plus an offset the
// generator steps forward one UTC day at a time, when no call is in
// flight. The dev stack's daily limits (the grant's 100,000 calls a day,
// the payer's 100,000 credits a day per principal) then refill as they
// would over that many real days, so that one state can hold millions of
// paid calls; its records are dated up to that many days ahead.
//
// Calls go to the controller's MCP socket, newline-delimited JSON-RPC as
// the keyless proxy passes it on, from many concurrent sessions, and to
// its foreground socket; operator actions go through the host's admin
// socket (package operator/admin), as steward-operator sends them. Every
// record in the three journals is written by the daemons' own code,
// signed and chained; nothing is synthesized. Between days the generator
// runs episodes that make every record kind of each journal appear:
// a purse frozen and thawed, a route deactivated and activated, a grant
// issued and revoked, the agent's limits revised, calls not sent (the
// appliance stopped), uncertain attempts (the appliance killed at its
// failpoints) resolved by redelivery, release and charge, a failed
// redelivery, asks approved, denied and left to expire. docs/HISTORY.md
// lists the kinds that do not appear and why.
//
// The state is kept at GEN/state: a dev state is bound to its path (its
// route records name its sockets, the controller's journal its config),
// so every copy is restored there. At each point (a number of bulk calls)
// the daemons are stopped cleanly, their RSS read first (what a daemon
// holds after serving that many calls since its start), the state copied
// to GEN/points/N, and the daemons started again. GEN/meta.json says what
// was generated: the points, the rate, the records of each kind, and the
// oldest call with its answer.
//
// # The measurement (Measure)
//
// For each point and each daemon (steward-operator serve, steward-controller
// serve, steward-appliance serve, steward-dev), several starts, each on a
// fresh copy of the point's state restored to GEN/state: the time from
// exec to readiness (READY=1 on a NOTIFY_SOCKET for the host and the
// controller, the ready line for the appliance and steward-dev), the CPU
// it spent to get there (/proc/PID/stat), what it read (/proc/PID/io
// rchar), the snapshot it says it loaded and the records it replayed
// after it (the host's and the appliance's start lines), its VmRSS at
// readiness and after a short load and an idle window, its VmHWM, and
// the latency of the oldest requestId asked again (answered from the
// journal: an MCP replay for the controller and steward-dev, the same
// invocation body for the appliance, an inspect of the oldest attempt on
// the admin socket for the host), checked against the answer recorded
// when it was made. The short load is those replays, and for steward-dev,
// the whole stack, new calls too. Optionally (MeasureOptions.Back) each
// daemon with snapshots starts once more with its newest snapshot
// removed: the start a crash just before the next snapshot leaves, a
// snapshot interval to replay. Measure takes sides (Side): the daemons of
// one commit on a generation of its own code, "before" and "after",
// measured start for start in turn, so that a load that moves on the
// machine weighs on both alike. Disk (journals, snapshots, indexes) is
// read from the generated state itself. Nothing is asserted about speed:
// TestHistory fails when a daemon does not start, answers the old
// requestId wrongly, or, having history, replays more than a snapshot
// interval at start (checkBounded).
package histbench
