// Package operator is the custody core of the operator's side of steward:
// the store that holds the operator's authority (controllers, purses,
// grants, route records, agents' limits), admits every call against it,
// reserves and settles its charge, journals it, and signs its receipt.
//
//	s, err := operator.OpenWith(dir, operator.Options{Daemon: h}) // replays the host journal
//	res := s.Dispatch(ctx, at, &d) // admit, consent, reserve, deliver, receipt
//	v, err := s.FundPurse("ctl", 1000) // an administrative change
//
// # What it owns and what it may touch
//
// One state (state.go) under one lock (Store.mu), rebuilt from the host
// journal at Open (replay.go, a hostlog.Visitor) and changed only here:
// no other package reads the state's maps or takes the store's locks (the
// routes' table, package operator/routetable's, is called only from here,
// Store.mu held).
// The dispatch path is the store's own: admission (admission.go), the
// payer's consent, the reservation, the delivery and the end records with
// their receipts (dispatch.go, ends.go, receipt.go), and the approvals
// path beside it (asks.go, ask_*.go). It reaches no socket: the running
// host (package operator/host) is its Daemon, which carries the consent
// request to the controller (Payer), the request to the application
// (Courier), opens the listeners a change needs (Listeners) and is told
// what to push (Pushes; the contract is package operator/hostapi's, named
// here by alias); a store a command opens has none. The record
// language is package operator/hostlog's; the audit (`receipts verify`)
// is package operator/audit's, which reads the journal and never the
// store; the admin language is package operator/admin's.
//
// Locks, in the order they are taken: Store.adminMu (one administrative
// change at a time, check to apply), Store.askMu (the appends of ask
// records, each with its apply), then Store.mu (the state); Store.receiptTurn
// is taken under Store.mu by the signer of a receipt and given up by the
// append that places its record (receipt.go). The daemon's own locks are
// taken before the store's, never under them: the store calls the Daemon
// with none of its locks held but adminMu.
//
// # Store layout
//
//	STORE/              0700
//	  operator.key      the operator's hybrid signing key (Ed25519 + ML-DSA-65,
//	                    COSE_Key, 0600; wire.WriteHybridKey; KeyFile)
//	  operator.pub      its public COSE_KeySet (0644), for verifiers (hostlog.PubFile)
//	  journal/          the host journal (package journal; hostlog.JournalDir):
//	                    Owner "steward-operator", Format
//	                    "steward-host-journal-v1", Config
//	                    {"operatorKid":"<hex kid of the Ed25519 half>"}
//	  admin.sock        while `serve` runs: the administrative socket (0600;
//	                    admin.SocketName)
//
// All operator state lives in the journal. Open rebuilds the in-memory state
// by iterating it; nothing else is kept on disk.
//
// # The ledger
//
// A purse's balance is its funds minus the charges of reserve records,
// less what not-sent records released and what outcome.v2 records did not
// charge of them. Every record that moves a balance (purse-fund, reserve,
// not-sent, outcome.v2) carries a store-wide ledger number, assigned when
// the change is applied in memory, just before its append; a version 1
// outcome and a refused record carry the ledger number current when their
// receipt was signed. `receipts verify` also checks that what the history
// charges is what the receipts charge plus what open reservations hold. Concurrent appends
// are group-committed, so journal order and ledger order may differ within a
// batch: `receipts verify` replays balance changes in ledger order, and
// checks that each receipt's BalanceAfter equals the controller's balance
// over exactly the changes numbered at or below its outcome's ledger number.
// A balance change applied in memory but whose append failed poisons the
// journal (package journal), so no later record can be durable.
//
// Admission uses the balance less tentative holds (reservations waiting for
// the payer's consent), so concurrent requests cannot overdraw a purse.
//
// # Attempt states (inspect)
//
//	not-seen            no reserve record (and no ask record)
//	awaiting-approval   ask record: admitted, nothing reserved or held, its
//	                    ask pending or decided and not yet collected
//	delivery-requested  reserve record durable, delivery in progress now
//	not-sent            not-sent record (its receipt answered, version 2)
//	refused             refused record: refused after admission (its receipt answered)
//	definite            outcome record (status, body and receipt answered),
//	                    also after an operator's redelivery (the detail names who)
//	uncertain           reserve with an uncertain record, or with neither an
//	                    outcome nor a not-sent record after a restart: only an
//	                    operator resolves it (steward-operator attempts resolve)
//	released            resolve record: the operator stated it was not performed
//	performed           resolve record: the operator stated it was performed
//
// # Failpoints (internal/failpoint) and the state each leaves
//
//	host-after-reserve    the reserve record is durable, nothing sent: after a
//	                      restart the attempt is uncertain (the host cannot
//	                      tell this point from a crash mid-write) and keeps its
//	                      reservation; the purse is charged once.
//	host-after-mark-send  just before the first request byte is written: the
//	                      same durable state, the same answer (uncertain).
//	host-after-send       the request bytes are written, no answer read:
//	                      uncertain, reservation kept; the application may
//	                      have executed the request.
//	host-after-outcome    the outcome record is durable, the dispatch not
//	                      answered: definite, with the
//	                      recorded status, body and receipt; charged once.
//	host-after-redeliver-record  an operator's redeliver record is durable,
//	                      nothing sent again: the attempt is still uncertain,
//	                      charged once; the operator may redeliver again.
//	host-after-resolve    the resolve record is durable, the command not
//	                      answered: released (charge given back once) or
//	                      performed (charged once), with its receipt.
//	host-after-not-sent   the not-sent.v2 record is durable, the dispatch not
//	                      answered: not-sent with its receipt, nothing charged.
//	host-after-ask        the ask record is durable, the dispatch not
//	                      answered: the attempt awaits approval, nothing held,
//	                      reserved or sent; the ask is pending after the
//	                      restart and a collect of the attempt goes on with it.
//	host-after-refused    the refused record is durable, the dispatch not
//	                      answered: refused with its receipt, nothing charged,
//	                      the attempt id never admitted again.
//
// # Admission and time
//
// Admission is checked when the dispatch arrives and again once the
// payer's consent has come, under the lock that journals the reservation:
// a freeze, revoke or expiry during the consent wait stops the call
// (nothing sent or charged). The wall clock (Options.Now) is the
// store's only source of wall time, read through Store.clock, which never
// returns a time earlier than the latest one recorded (every journal
// record's time, every reservation's day) or read: a clock set back refills
// no daily count and revives no expired grant, and is logged. A refusal
// names the limit and when it refills; its detail goes to the log.
//
// A dispatch naming an agent is checked against the operator's limits for
// that agent of its controller (agent-limits records; agentlimits.go) at
// both points, after the grant and the purse; its daily counts come from
// the reserve.v2 records that name it, its rate from a bucket in memory.
// Allowance answers what an agent may still spend today, and Collect the
// verdict of an attempt awaiting approval and its end once decided
// (DESIGN.md section 5, "Approvals"; ask_dispatch.go).
//
// A listing through a grant with operation patterns is paged over the
// covered operations alone (hostapi.Filtered, over the daemon's Courier):
// the store says what the grant and its agent cover (listFilter), and no
// offset, page or next_offset counts what they hid.
//
// # Route states
//
// The routes, their states and their checks are package
// operator/routetable's: its Table is part of the state (state embeds it)
// under Store.mu. The store checks around it what the rest of the state
// decides (routes.go): a route's controller, a control socket, the
// attempts that keep a route from being removed. A change of routes takes
// effect at once while the host runs (Store.mutateRoute, mutate.go).
package operator
