// Package hostlog is the host journal's language: the journal's identity
// in an operator store, its record kinds and their bodies, strict decoding,
// and the older versions of a record, still read and upgraded. The custody
// core (package operator) writes and replays these records; the audit
// (package operator/audit) verifies them. Neither defines a record of its
// own: a record kind is one entry here.
//
// Reading a journal:
//
//	j, pub, err := hostlog.OpenReadOnly(storeDir) // no lock; works while the host runs
//	err = j.Iterate(1, func(r journal.Record) error {
//		rec, err := hostlog.Decode(r) // strict; refuses a kind it does not have
//		if err != nil {
//			return err
//		}
//		return rec.Visit(v) // v, a Visitor: one method a kind
//	})
//
// A Visitor has one method for every kind, so that a kind added here
// without its step in replay or in the audit does not compile. A journal's
// own records (bind, rebind) are not host records: Decode returns nil for
// them.
//
// # What it owns and what it may touch
//
// The host journal's identity in a store (journal.go), its record kinds
// and their bodies (kinds.go, bodies.go), and what a record may hold
// (grammar.go): the bounds of every name, pattern, route record, agent's
// limits record and approval policy, which the store holds a record to
// when a command makes it and when replay reads it back. It holds no
// state and imports nothing of the operator's side: the store (package
// operator) and the audit (package operator/audit) both stand on it, so
// that the audit proves what the records say without the store.
//
// # Versions
//
// A new version of a record is a new kind: its name carries the version
// ("reserve.v2"; journal kinds may hold '.'), since a body decodes strictly
// and an old reader must refuse a new body rather than misread it. Writers
// append only the newest version; the older kind stays so that old
// journals still replay and verify (journal/testdata/golden), and its body
// type has an Upgrade to the newer one, which a Visitor's step for the old
// kind calls when the two mean the same:
//
//	func (rp *replayer) NotSent(r journal.Record, b *hostlog.NotSent) error {
//		return rp.NotSentV2(r, b.Upgrade())
//	}
//
// # Record kinds
//
// Bodies are deterministic CBOR maps, decoded strictly. This list is the
// table kinds (kinds.go) in prose, and TestDocListsEveryRecordKind holds
// the two together: a kind's line starts with the kind and its body's keys
// in braces, in its Go type's order; indented lines continue it. The
// journal's own records (bind, rebind) belong to package journal.
//
//	controller-add  {name, uid, keys}            keys: msg.ControllerKeys CBOR
//	controller-add.v2 {name, uid, keys, control}  control: the controller's
//	                 control socket (package host), which `bundle build` puts
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
//	                 onTimeout, limitsRevision, day, agentUid,
//	                 conversationName}
//	                 a call to an operation the agent's limits record
//	                 (revision limitsRevision) marks for approval, admitted and
//	                 holding nothing: the ask (id "ask-" and 12 hex digits), the
//	                 canonical request (which hashes to requestSha256 and
//	                 carries the arguments), its price, the agent's
//	                 justification (omitted when none), and the policy's terms
//	                 when it was raised (unix ms; parkMs, onTimeout); agentUid
//	                 the calling session's account ("uid:N", the controller's
//	                 word; omitted when it sent none), whose human answers are
//	                 refused; conversationName the agent's own name of
//	                 conversation (the dispatch's, checked to scope to it;
//	                 omitted when it named none). Appended
//	                 before the dispatch is answered; its attempt awaits
//	                 approval until a collect goes on with it (a reserve.v2 or
//	                 a refused record of the same attempt follows). day is the
//	                 UTC day whose calls of the agent it counts one of (omitted
//	                 by hosts before asks counted calls: counts none); the
//	                 reserve.v2 of its attempt counts no second call.
//	ask-answer      {ask, verdict, by, account, advisor, note, at, collectBy}
//	                 the first answer to a pending ask, approve or deny: by a
//	                 human (by "uid:N" from SO_PEERCRED, account its name) or an
//	                 advisor agent (by "agent:NAME", advisor NAME, counted
//	                 against the asking agent's conversation's bound and its
//	                 UTC day's, the day of at); note the
//	                 human's note or the advisor's sentence (omitted when empty);
//	                 collectBy the end of an approval's collect window (at plus
//	                 the ask's expiry duration; only when its on-timeout verdict
//	                 is deny; absent in answers written before windows).
//	ask-expired     {ask, verdict, at}           an unanswered ask read after its
//	                 expiry: decided by its on-timeout verdict, at its expiry
//	                 time; its answeredBy is "expiry".
//	ask-window      {ask, collectBy}             the collect window of an ask
//	                 approved before windows (its ask-answer has no collectBy),
//	                 uncollected, whose on-timeout verdict is deny: collectBy
//	                 is when the upgraded host first read it plus the ask's
//	                 expiry duration. Written once, the first time an upgraded
//	                 host that may write reads the ask.
//	ask-lapsed      {ask, verdict, at}           an approved ask not collected
//	                 by its collectBy (at): it lapses to its on-timeout verdict,
//	                 deny, and its attempt's collect is refused as denied.
//	clock-accept    {at, was, by}                the operator accepted the wall
//	                 clock at (unix ms) as the store's time, behind the latest
//	                 time recorded (was): the store's time is at from this
//	                 record on, and every daily count of a day after at's day
//	                 moves to at's day, keeping its count (nothing refills).
//
// The receipt chain is in receipt Seq order, which is signing order; journal
// order may differ within a group-commit batch. A checkpoint covers a head
// only once every receipt up to it is durable.
package hostlog
