// Package operator is the operator's side of steward: the store that holds
// the operator's authority (controllers, purses, grants, route records) and
// the host daemon that admits, delivers, charges and receipts every call.
//
// # Store layout
//
//	STORE/              0700
//	  operator.key      the operator's hybrid signing key (Ed25519 + ML-DSA-65,
//	                    COSE_Key, 0600; wire.WriteHybridKey)
//	  operator.pub      its public COSE_KeySet (0644), for verifiers
//	  journal/          the host journal (package journal): Owner
//	                    "steward-operator", Format "steward-host-journal-v1",
//	                    Config {"operatorKid":"<hex kid of the Ed25519 half>"}
//	  admin.sock        while `serve` runs: the administrative socket (0600)
//
// All operator state lives in the journal. Open rebuilds the in-memory state
// by iterating it; nothing else is kept on disk.
//
// # Journal record kinds
//
// Bodies are deterministic CBOR maps, decoded strictly. This list is the
// table hostRecords (records.go) in prose, and TestDocListsEveryRecordKind
// holds the two together: a kind's line starts with the kind and its body's
// keys in braces, in its Go type's order; indented lines continue it. The
// journal's own records (bind, rebind) belong to package journal.
//
//	controller-add  {name, uid, keys}            keys: msg.ControllerKeys CBOR
//	controller-add.v2 {name, uid, keys, control}  control: the controller's
//	                 control socket (control.go), which `bundle build` puts
//	                 in its bundle; controller-add is this without one
//	controller-control {controller, control}     sets the control socket of
//	                 a controller added by a controller-add record
//	purse-fund      {controller, amount, ledger}
//	purse-freeze    {controller}
//	purse-thaw      {controller}
//	grant-issue     {grant}                      grant: signed msg.Grant (COSE_Sign)
//	grant-revoke    {id}
//	route-register  {record}                     record: signed msg.RouteRecord;
//	                 version 1 of route-register.v2: its route is active (a
//	                 route with no state record is); still read.
//	route-register.v2 {record, state, by, at}
//	                 what hosts write now: a signed msg.RouteRecord, who
//	                 registered it (by: "uid:N", the admin peer's SO_PEERCRED
//	                 while the host runs, the store's account otherwise) and
//	                 when (at: unix ms, the store's clock), and the route's
//	                 state once registered: active or inactive for a new
//	                 route (`route register --inactive`), the route's own for
//	                 a later revision (a new revision keeps it).
//	route-state     {route, state, by, at}       an operator's `route activate`
//	                 (state active), `route deactivate` (inactive) or `route
//	                 remove` (removed), by and at as for route-register.v2.
//	                 Removal is final: a removed route takes no revision and
//	                 no other state, and gives up its forward socket.
//	reserve         {attempt, controller, grant, application, operation, kind,
//	                 requestSha256, charge, consent, day, ledger}
//	                 the reservation and mark-send of one attempt, in ONE record:
//	                 once it is durable, delivery may begin; it is written once
//	                 per attempt and never repeated. consent is the payer's
//	                 signed msg.Consent (nil for a free request); day is the
//	                 UTC day number (unix ms / 86,400,000) the daily count uses.
//	reserve.v2      {attempt, controller, grant, application, operation, kind,
//	                 requestSha256, charge, consent, day, ledger, method, path, body,
//	                 agent, conversation}
//	                 what hosts write now: reserve's fields and the exact request
//	                 (method, path, body: at most the invocation bound), which must
//	                 hash to requestSha256, so that an operator can redeliver the
//	                 attempt. A first-version reserve reads as one with no request:
//	                 such an attempt can be released or charged, not redelivered.
//	                 agent and conversation (omitted when empty) are the
//	                 dispatch's agent and the invoke body's conversationId: replay
//	                 counts the agent's limits by them, so a restart refills none.
//	not-sent        {attempt, detail, ledger}    version 1 of not-sent.v2,
//	                 with no receipt; still read.
//	not-sent.v2     {attempt, detail, receipt, receiptSeq, ledger}
//	                 delivery failed before the first byte was written: the
//	                 reservation is released, and the receipt says so
//	                 (not-sent, charge 0, reason the detail).
//	uncertain       {attempt, detail}            delivery failed after the first
//	                 byte: the attempt keeps its reservation. (A reserve with no
//	                 later not-sent or outcome record is uncertain too: that is
//	                 what a crash leaves.)
//	outcome         {attempt, status, body, receipt, receiptSeq, ledger}
//	                 version 1 of outcome.v2: it charged the whole reservation,
//	                 and its ledger is the one current when it was signed; still
//	                 read.
//	outcome.v2      {attempt, status, body, receipt, receiptSeq, charge, ledger}
//	                 the application's answer, the charge it settled (the
//	                 reservation for a 2xx, the grant's refusal price or 0
//	                 otherwise; the rest is released, at its own ledger number)
//	                 and the signed receipt, one record (the receipt is signed
//	                 before the append, so outcome and receipt share one
//	                 fdatasync).
//	refused         {attempt, controller, reason, receipt, receiptSeq, ledger,
//	                 agent, conversation}
//	                 an admitted attempt refused before anything was reserved
//	                 (the payer refused, its consent could not be obtained, or
//	                 the last-moment check refused): nothing sent or charged;
//	                 the receipt (refused, charge 0, reason) carries the
//	                 payer's consent when it had one. Its ledger is the one
//	                 current when it was signed; the attempt id stays taken. agent
//	                 and conversation (omitted when the dispatch named no agent)
//	                 are the dispatch's, as its receipt names them.
//	checkpoint      {checkpoint, seq}            signed msg.Checkpoint over the
//	                 durable receipt chain head (seq: the receipt it covers).
//	redeliver       {attempt, by, reason}        an operator's redelivery of an
//	                 uncertain attempt (`attempts resolve --redeliver`), one per
//	                 command, journaled before its first byte is sent; by is the
//	                 admin peer's account ("uid:N", from SO_PEERCRED). Its outcome
//	                 is an outcome record (or an uncertain one), as for a first
//	                 delivery, its receipt's resolvedBy this by: no second
//	                 reservation, no second charge.
//	resolve         {attempt, state, by, reason, receipt, receiptSeq, ledger}
//	                 an operator's word on an uncertain attempt, with its signed
//	                 version 2 receipt: state "released" (not performed: the
//	                 reservation is released, charge 0; ledger numbers the
//	                 release) or "performed" (performed, no answer recorded: the
//	                 reservation is settled and charged).
//	agent-limits    {limits}                     limits: signed msg.AgentLimits
//	                 (COSE_Sign): the operator's limits for one agent of one
//	                 controller; revision 1 first, each later one the previous
//	                 plus 1, which it replaces.
//	ask             {ask, attempt, controller, route, agent, conversation,
//	                 application, operation, kind, requestSha256, method, path,
//	                 body, price, justification, raisedAt, expiresAt, parkMs,
//	                 onTimeout, limitsRevision}
//	                 a call to an operation the agent's limits record
//	                 (revision limitsRevision) marks for approval, admitted and
//	                 holding nothing: the ask (id "ask-" and 12 hex digits), the
//	                 canonical request (which hashes to requestSha256 and
//	                 carries the arguments), its price, the agent's
//	                 justification (omitted when none), and the policy's terms
//	                 when it was raised (unix ms; parkMs, onTimeout). Appended
//	                 before the dispatch is answered; its attempt awaits
//	                 approval until a collect goes on with it (a reserve.v2 or
//	                 a refused record of the same attempt follows).
//	ask-answer      {ask, verdict, by, account, advisor, note, at}
//	                 the first answer to a pending ask, approve or deny: by a
//	                 human (by "uid:N" from SO_PEERCRED, account its name) or an
//	                 advisor agent (by "agent:NAME", advisor NAME, counted
//	                 against the asking agent's conversation's bound); note the
//	                 human's note or the advisor's sentence (omitted when empty).
//	ask-expired     {ask, verdict, at}           an unanswered ask read after its
//	                 expiry: decided by its on-timeout verdict, at its expiry
//	                 time; its answeredBy is "expiry".
//
// The receipt chain is in receipt Seq order, which is signing order; journal
// order may differ within a group-commit batch. A checkpoint covers a head
// only once every receipt up to it is durable.
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
// # Delivery
//
// Each delivery dials a fresh connection to the route's upstream socket
// (connect timeout from the route) and writes the whole HTTP/1.1 request with
// "Connection: close" in one Write: zero bytes written with an error is
// not-sent, anything after the first byte is uncertain. The answer is read
// with http.ReadResponse under the route's response deadline, its body
// bounded by MaxResponseBody so the dispatch result fits a reply frame.
// Neither timeout runs past the dispatch's deadline plus
// msg.DeadlineTolerance (deadline.go): a dispatch already past it is refused
// before admission and again under the reservation's lock, with nothing
// reserved. A route that names its application's account (AppAccount) is
// dialled with wire.Dial (appaccount.go): the socket owned by that
// account's uid, resolved at every dial, under safe ancestors, and
// SO_PEERCRED naming that uid; a failed check is not-sent, the path only
// in the host's log.
// A listing through a grant with operation patterns is paged by the host
// over the covered operations alone: it reads the application's listing
// from its start (pages of oracleops.MaxLimit, at most maxFilteredPages)
// and answers the agent's offset and limit over what the grant covers, with
// next_offset computed over those, so that no offset, page or next_offset
// counts what the grant hid. A listing that cannot be filtered is answered
// 502, never passed through.
//
// # Admission and time
//
// Admission is checked when the dispatch arrives and again once the
// payer's consent has come, under the lock that journals the reservation:
// a freeze, revoke or expiry during the consent wait stops the call
// (nothing sent or charged). The wall clock (ServeOptions.Now) is the
// host's only source of wall time, read through Store.clock, which never
// returns a time earlier than the latest one recorded (every journal
// record's time, every reservation's day) or read: a clock set back refills
// no daily count and revives no expired grant, and is logged. A refusal
// names the limit and when it refills; its detail goes to the log.
//
// A dispatch naming an agent is checked against the operator's limits for
// that agent of its controller (agent-limits records; agentlimits.go) at
// both points, after the grant and the purse; its daily counts come from
// the reserve.v2 records that name it, its rate from a bucket in memory.
// A route's forward channel also answers allowance (what an agent may
// still spend today), besides dispatch and inspect, and collect: the
// verdict of an attempt awaiting approval, and its end once decided
// (DESIGN.md section 5, "Approvals"; ask_dispatch.go).
//
// # Control socket
//
// Each controller's record names its control socket (controller add
// --control; controller control for one added before it, or to move it),
// and the host listens on it at start, bound as a forward socket is
// (control.go); through the running host both commands take effect at
// once (Store.mutateControl, controllisten.go): the socket is listened on
// before the record is appended, a moved socket's old listener closed
// once the new one serves. It
// answers routes (the RouteIDs of the selected revisions of that
// controller's routes, with the signed records the controller does not
// already know), inspect and allowance; a controller with no route still
// has it, so the routes registered later are found there. bundle build
// puts the path in the bundle and refuses a controller without one.
//
// # Admin socket
//
// While `serve` runs it holds the journal lock, and administrative commands
// (fund, freeze, thaw, grant issue/revoke, controller add/control, route
// register/activate/deactivate/remove, agent set)
// reach it over STORE/admin.sock: a wire listener (mode 0600 in the 0700
// store) that admits only the daemon's own UID, speaking signed frames (the
// operator key's Ed25519 half on both sides, roles "operator-admin-client"
// and "operator-admin"). The same Store methods run in either case.
// `attempts list|inspect|resolve` go there too while the host runs: a
// resolution's resolver is the connection's SO_PEERCRED uid ("uid:N"),
// never what the request says, and a redelivery is the host's own work.
// With no host, list and inspect read the journal read-only and a release
// or charge runs on the store directly; a redelivery needs the host.
// A route change names who asked the same way ("uid:N" from SO_PEERCRED;
// the command's own account on a store it opens itself).
//
// # Route states
//
// A route is active, inactive or removed (hostlog.RouteState; route_state.go):
// route-register.v2 records give a new route its first state and
// route-state records change it, so replay rebuilds every state (a route
// with neither, registered before route states, is active). Only active
// routes are listened on and in a controller's route table
// (state.activeRoutes, which the listeners and the control socket share);
// at most one is active for an application of a controller; the route
// bound counts routes not removed; removal is final and refused while an
// attempt of the route's application is uncertain or being delivered.
// While the host runs, a change through the admin socket takes effect at
// once (Store.mutateRoute, routelisten.go): the listener an activation or
// registration needs is opened before its record is appended, and the
// listener set is matched to the state after. A dispatch is served by its
// route's selected revision as it is when the dispatch arrives, so one on
// a channel opened before the route was deactivated or removed, or before
// its revision moved to another socket, is refused unavailable with
// nothing journaled; one admitted before and waiting for consent is
// stopped by the last-moment check, like a freeze.
//
// # Under systemd
//
// `serve` sends READY=1 once the journal is open and every socket is bound,
// then feeds the unit's watchdog (WATCHDOG_USEC) while the host journal is
// sound. After a failed fdatasync the journal stops for good (what is on
// disk is unknown), and so does it when a receipt's record is not written
// (receipts are journal.AppendLinked records: receipt N+1 is signed on top
// of N, so none may land after a lost one): `serve` shuts down and exits 1
// with one line saying so, so that systemd restarts the host and it
// reopens the journal from what is on disk, where the attempt whose
// receipt was lost is a reservation without an outcome (uncertain, its
// charge held once). Any other failed write is undone by the journal and
// the host goes on. SIGINT or
// SIGTERM sends STOPPING=1 and shuts down cleanly. CLI takes these hooks
// with package systemd's signatures; the cmd main passes systemd's.
package operator
