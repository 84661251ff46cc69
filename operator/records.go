package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// Journal record kinds of the host journal (see doc.go).
const (
	kindControllerAdd = "controller-add"
	kindPurseFund     = "purse-fund"
	kindPurseFreeze   = "purse-freeze"
	kindPurseThaw     = "purse-thaw"
	kindGrantIssue    = "grant-issue"
	kindGrantRevoke   = "grant-revoke"
	kindRouteRegister = "route-register"
	kindReserve       = "reserve"
	kindNotSent       = "not-sent"
	kindNotSentV2     = "not-sent.v2"
	kindUncertain     = "uncertain"
	kindOutcome       = "outcome"
	kindOutcomeV2     = "outcome.v2"
	kindRefused       = "refused"
	kindCheckpoint    = "checkpoint"
)

// The controller's control socket (control.go): controller-add.v2 is a
// controller-add with it, and controller-control gives one to a
// controller that a controller-add record pinned without it.
const (
	kindControllerAddV2   = "controller-add.v2"
	kindControllerControl = "controller-control"
)

// hostRecords is the host journal's record language, the one list of its
// kinds: each kind's body type, what Open's replay does with it (apply, in
// replay.go) and what `receipts verify` does with it (verify, in audit.go;
// nil when a kind is no evidence about receipts or purses). Both passes
// decode every record once, strictly, through this table and refuse a kind
// it does not name. doc.go lists the same kinds with their body keys, and
// TestDocListsEveryRecordKind holds the two together.
//
// A new kind is one entry here, a body type below and its line in doc.go.
// A new version of a record is a new kind: its name carries the version
// ("reserve.v2"; journal kinds may hold '.'), since a body decodes strictly
// and an old reader must refuse a new body rather than misread it. Writers
// append only the newest version; the older entry stays so that old
// journals still replay and verify (journal/testdata/golden), and its
// handlers upgrade the old body and hand it to the new kind's; doc.go
// lists both, each with its keys:
//
//	hostRecord(kindReserve, (*replayer).reserveV1, (*journalAudit).reserveV1),
//	hostRecord(kindReserveV2, (*replayer).reserve, (*journalAudit).reserve),
//
//	func (rp *replayer) reserveV1(r journal.Record, b *recReserve) error {
//		return rp.reserve(r, b.upgrade()) // *recReserveV2
//	}
var hostRecords = []recordKind{
	hostRecord(kindControllerAdd, (*replayer).controllerAddV1, (*journalAudit).controllerAddV1),
	hostRecord(kindControllerAddV2, (*replayer).controllerAdd, (*journalAudit).controllerAdd),
	hostRecord(kindControllerControl, (*replayer).controllerControl, nil),
	hostRecord(kindPurseFund, (*replayer).purseFund, (*journalAudit).purseFund),
	hostRecord(kindPurseFreeze, (*replayer).purseFrozen, nil),
	hostRecord(kindPurseThaw, (*replayer).purseFrozen, nil),
	hostRecord(kindGrantIssue, (*replayer).grantIssue, nil),
	hostRecord(kindGrantRevoke, (*replayer).grantRevoke, nil),
	hostRecord(kindRouteRegister, (*replayer).routeRegister, nil),
	hostRecord(kindRouteRegisterV2, (*replayer).routeRegisterV2, nil),
	hostRecord(kindRouteState, (*replayer).routeState, nil),
	hostRecord(kindReserve, (*replayer).reserveV1, (*journalAudit).reserve),
	hostRecord(kindReserveV2, (*replayer).reserveV2, (*journalAudit).reserveV2),
	hostRecord(kindNotSent, (*replayer).notSentV1, (*journalAudit).notSentV1),
	hostRecord(kindNotSentV2, (*replayer).notSent, (*journalAudit).notSent),
	hostRecord(kindUncertain, (*replayer).uncertain, (*journalAudit).uncertain),
	hostRecord(kindOutcome, (*replayer).outcomeV1, (*journalAudit).outcomeV1),
	hostRecord(kindOutcomeV2, (*replayer).outcome, (*journalAudit).outcome),
	hostRecord(kindRefused, (*replayer).refused, (*journalAudit).refused),
	hostRecord(kindCheckpoint, (*replayer).checkpoint, (*journalAudit).checkpoint),
	hostRecord(kindRedeliver, (*replayer).redeliver, (*journalAudit).redeliver),
	hostRecord(kindResolve, (*replayer).resolve, (*journalAudit).resolve),
	hostRecord(kindAgentLimits, (*replayer).agentLimits, (*journalAudit).agentLimits),
	hostRecord(kindAsk, (*replayer).ask, (*journalAudit).ask),
	hostRecord(kindAskAnswer, (*replayer).askAnswer, (*journalAudit).askAnswer),
	hostRecord(kindAskExpired, (*replayer).askExpired, (*journalAudit).askExpired),
}

// recordKind is one entry of hostRecords. Its handlers take the body that
// newBody made and the journal decoded; hostRecord builds them from typed
// functions, so no handler asserts a type of its own.
type recordKind struct {
	kind    string
	newBody func() any // a pointer to a zero body of the kind's Go type
	apply   func(rp *replayer, r journal.Record, body any) error
	verify  func(a *journalAudit, r journal.Record, body any) error // nil: nothing to verify
}

// hostRecord makes the table entry of a kind whose body is a B.
func hostRecord[B any](kind string,
	apply func(*replayer, journal.Record, *B) error,
	verify func(*journalAudit, journal.Record, *B) error) recordKind {
	k := recordKind{
		kind:    kind,
		newBody: func() any { return new(B) },
		apply:   func(rp *replayer, r journal.Record, body any) error { return apply(rp, r, body.(*B)) },
	}
	if verify != nil {
		k.verify = func(a *journalAudit, r journal.Record, body any) error { return verify(a, r, body.(*B)) }
	}
	return k
}

// hostRecordKinds indexes hostRecords by kind.
var hostRecordKinds = indexRecordKinds(hostRecords)

func indexRecordKinds(table []recordKind) map[string]*recordKind {
	m := make(map[string]*recordKind, len(table))
	for i := range table {
		if _, dup := m[table[i].kind]; dup {
			panic("operator: record kind " + table[i].kind + " is in hostRecords twice")
		}
		m[table[i].kind] = &table[i]
	}
	return m
}

// journalOwnKind reports the records package journal writes itself (the
// bind record and its rebinds): neither pass interprets them.
func journalOwnKind(kind string) bool { return kind == "bind" || kind == "rebind" }

// decodeRecord decodes a host record's body by its kind's entry, refusing
// a kind hostRecords does not name.
func decodeRecord(r journal.Record) (*recordKind, any, error) {
	k := hostRecordKinds[r.Kind]
	if k == nil {
		return nil, nil, fmt.Errorf("unknown record kind %q", r.Kind)
	}
	body := k.newBody()
	if err := decode(r, body); err != nil {
		return nil, nil, err
	}
	return k, body, nil
}

// decode decodes a record's body into v, strictly (wire.Unmarshal).
func decode(r journal.Record, v any) error { return wire.Unmarshal(r.Body, v) }

// The body types, one a kind (freeze and thaw share recPurse).

type recControllerAdd struct {
	Name string `cbor:"name"`
	UID  uint32 `cbor:"uid"`
	Keys []byte `cbor:"keys"`
}

// upgrade is a controller-add record as a controller-add.v2 with no
// control socket: `controller control` gives it one.
func (r *recControllerAdd) upgrade() *recControllerAddV2 {
	return &recControllerAddV2{Name: r.Name, UID: r.UID, Keys: r.Keys}
}

// recControllerAddV2 is a controller-add with the controller's control
// socket (operator/control.go).
type recControllerAddV2 struct {
	Name    string `cbor:"name"`
	UID     uint32 `cbor:"uid"`
	Keys    []byte `cbor:"keys"`
	Control string `cbor:"control"`
}

// recControllerControl sets a controller's control socket.
type recControllerControl struct {
	Controller string `cbor:"controller"`
	Control    string `cbor:"control"`
}

type recPurseFund struct {
	Controller string `cbor:"controller"`
	Amount     uint64 `cbor:"amount"`
	Ledger     uint64 `cbor:"ledger"`
}

type recPurse struct {
	Controller string `cbor:"controller"`
}

type recGrantIssue struct {
	Grant []byte `cbor:"grant"`
}

type recGrantRevoke struct {
	ID string `cbor:"id"`
}

type recRouteRegister struct {
	Record []byte `cbor:"record"`
}

type recReserve struct {
	Attempt       string `cbor:"attempt"`
	Controller    string `cbor:"controller"`
	Grant         string `cbor:"grant"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	Kind          string `cbor:"kind"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Charge        uint64 `cbor:"charge"`
	Consent       []byte `cbor:"consent"`
	Day           int64  `cbor:"day"`
	Ledger        uint64 `cbor:"ledger"`
}

type recNotSent struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
	Ledger  uint64 `cbor:"ledger"`
}

// upgrade reads a version 1 not-sent record as version 2: it carries no
// receipt (the hosts that wrote it signed none for this end).
func (b *recNotSent) upgrade() *recNotSentV2 {
	return &recNotSentV2{Attempt: b.Attempt, Detail: b.Detail, Ledger: b.Ledger}
}

// recNotSentV2 releases the reservation of an attempt whose delivery
// failed before its first byte and carries the receipt of that end
// (Outcome not-sent, charge 0, Reason the detail).
type recNotSentV2 struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"`
	Ledger  uint64 `cbor:"ledger"`
}

type recUncertain struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
}

type recOutcome struct {
	Attempt string `cbor:"attempt"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"` // the receipt's Seq, so Open need not parse it
	Ledger  uint64 `cbor:"ledger"`
}

// upgrade reads a version 1 outcome as version 2: it charged the whole
// reservation (charge) and moved no balance, so its ledger number is the
// one current when its receipt was signed, not one of its own.
func (b *recOutcome) upgrade(charge uint64) *recOutcomeV2 {
	return &recOutcomeV2{Attempt: b.Attempt, Status: b.Status, Body: b.Body, Receipt: b.Receipt,
		Seq: b.Seq, Charge: charge, Ledger: b.Ledger}
}

// recOutcomeV2 is an application's answer, the charge it settled (the
// reservation for a 2xx, the refusal price or nothing otherwise: the rest
// of the reservation is released) and the signed receipt, one record. Its
// ledger number is its own: the release moves the balance (by 0 when the
// whole reservation is charged).
type recOutcomeV2 struct {
	Attempt string `cbor:"attempt"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"`
	Charge  uint64 `cbor:"charge"`
	Ledger  uint64 `cbor:"ledger"`
}

// recRefused ends an admitted attempt that was refused before anything
// was reserved (the payer refused, its consent could not be obtained, or
// the last-moment check refused): nothing was sent or charged. It carries
// the receipt (Outcome refused, charge 0, Reason) and the ledger number
// current when it was signed (it moves no balance).
type recRefused struct {
	Attempt    string `cbor:"attempt"`
	Controller string `cbor:"controller"`
	Reason     string `cbor:"reason"`
	Receipt    []byte `cbor:"receipt"`
	Seq        uint64 `cbor:"receiptSeq"`
	Ledger     uint64 `cbor:"ledger"`
	// Agent and Conversation are the dispatch's, when it named an agent
	// (the receipt names them too): inspect and attempts list show them
	// after a restart.
	Agent        string `cbor:"agent,omitempty"`
	Conversation string `cbor:"conversation,omitempty"`
}

type recCheckpoint struct {
	Checkpoint []byte `cbor:"checkpoint"`
	Seq        uint64 `cbor:"seq"` // the receipt sequence it covers
}
