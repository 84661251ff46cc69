package hostlog

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// The host journal's record kinds (doc.go lists each with its body).
const (
	KindControllerAdd     = "controller-add"
	KindControllerAddV2   = "controller-add.v2"
	KindControllerControl = "controller-control"
	KindPurseFund         = "purse-fund"
	KindPurseFreeze       = "purse-freeze"
	KindPurseThaw         = "purse-thaw"
	KindGrantIssue        = "grant-issue"
	KindGrantRevoke       = "grant-revoke"
	KindRouteRegister     = "route-register"
	KindRouteRegisterV2   = "route-register.v2"
	KindRouteState        = "route-state"
	KindReserve           = "reserve"
	KindReserveV2         = "reserve.v2"
	KindNotSent           = "not-sent"
	KindNotSentV2         = "not-sent.v2"
	KindUncertain         = "uncertain"
	KindOutcome           = "outcome"
	KindOutcomeV2         = "outcome.v2"
	KindRefused           = "refused"
	KindCheckpoint        = "checkpoint"
	KindRedeliver         = "redeliver"
	KindResolve           = "resolve"
	KindAgentLimits       = "agent-limits"
	KindAsk               = "ask"
	KindAskAnswer         = "ask-answer"
	KindAskExpired        = "ask-expired"
	KindClockAccept       = "clock-accept"
	KindAskWindow         = "ask-window"
	KindAskLapsed         = "ask-lapsed"
)

// Visitor takes each host record, decoded: one method a kind, named as its
// body type is (purse-freeze and purse-thaw share a body and have a
// method each). Replay (package operator) and the audit (package
// operator/audit) are Visitors; a step returns the first fault it finds.
type Visitor interface {
	ControllerAdd(journal.Record, *ControllerAdd) error
	ControllerAddV2(journal.Record, *ControllerAddV2) error
	ControllerControl(journal.Record, *ControllerControl) error
	PurseFund(journal.Record, *PurseFund) error
	PurseFreeze(journal.Record, *Purse) error
	PurseThaw(journal.Record, *Purse) error
	GrantIssue(journal.Record, *GrantIssue) error
	GrantRevoke(journal.Record, *GrantRevoke) error
	RouteRegister(journal.Record, *RouteRegister) error
	RouteRegisterV2(journal.Record, *RouteRegisterV2) error
	RouteStateChange(journal.Record, *RouteStateChange) error
	Reserve(journal.Record, *Reserve) error
	ReserveV2(journal.Record, *ReserveV2) error
	NotSent(journal.Record, *NotSent) error
	NotSentV2(journal.Record, *NotSentV2) error
	Uncertain(journal.Record, *Uncertain) error
	Outcome(journal.Record, *Outcome) error
	OutcomeV2(journal.Record, *OutcomeV2) error
	Refused(journal.Record, *Refused) error
	Checkpoint(journal.Record, *Checkpoint) error
	Redeliver(journal.Record, *Redeliver) error
	Resolve(journal.Record, *Resolve) error
	AgentLimits(journal.Record, *AgentLimits) error
	Ask(journal.Record, *Ask) error
	AskAnswer(journal.Record, *AskAnswer) error
	AskExpired(journal.Record, *AskExpired) error
	ClockAccept(journal.Record, *ClockAccept) error
	AskWindow(journal.Record, *AskWindow) error
	AskLapsed(journal.Record, *AskLapsed) error
}

// kinds is the host journal's record language, the one list of its kinds:
// each kind's body type and its Visitor method. Decode reads every record
// through it and refuses a kind it does not name.
var kinds = []kind{
	entry(KindControllerAdd, Visitor.ControllerAdd),
	entry(KindControllerAddV2, Visitor.ControllerAddV2),
	entry(KindControllerControl, Visitor.ControllerControl),
	entry(KindPurseFund, Visitor.PurseFund),
	entry(KindPurseFreeze, Visitor.PurseFreeze),
	entry(KindPurseThaw, Visitor.PurseThaw),
	entry(KindGrantIssue, Visitor.GrantIssue),
	entry(KindGrantRevoke, Visitor.GrantRevoke),
	entry(KindRouteRegister, Visitor.RouteRegister),
	entry(KindRouteRegisterV2, Visitor.RouteRegisterV2),
	entry(KindRouteState, Visitor.RouteStateChange),
	entry(KindReserve, Visitor.Reserve),
	entry(KindReserveV2, Visitor.ReserveV2),
	entry(KindNotSent, Visitor.NotSent),
	entry(KindNotSentV2, Visitor.NotSentV2),
	entry(KindUncertain, Visitor.Uncertain),
	entry(KindOutcome, Visitor.Outcome),
	entry(KindOutcomeV2, Visitor.OutcomeV2),
	entry(KindRefused, Visitor.Refused),
	entry(KindCheckpoint, Visitor.Checkpoint),
	entry(KindRedeliver, Visitor.Redeliver),
	entry(KindResolve, Visitor.Resolve),
	entry(KindAgentLimits, Visitor.AgentLimits),
	entry(KindAsk, Visitor.Ask),
	entry(KindAskAnswer, Visitor.AskAnswer),
	entry(KindAskExpired, Visitor.AskExpired),
	entry(KindClockAccept, Visitor.ClockAccept),
	entry(KindAskWindow, Visitor.AskWindow),
	entry(KindAskLapsed, Visitor.AskLapsed),
}

// kind is one entry of kinds. Its visit takes the body that newBody made
// and Decode filled; entry builds both from a typed method, so no step
// asserts a type of its own.
type kind struct {
	name    string
	newBody func() any // a pointer to a zero body of the kind's Go type
	visit   func(v Visitor, r journal.Record, body any) error
}

// entry makes the table entry of a kind whose body is a B.
func entry[B any](name string, visit func(Visitor, journal.Record, *B) error) kind {
	return kind{
		name:    name,
		newBody: func() any { return new(B) },
		visit:   func(v Visitor, r journal.Record, body any) error { return visit(v, r, body.(*B)) },
	}
}

// KindNames lists every record kind of the host journal, in the table's
// order: what a journal made to hold every kind is checked against.
func KindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

// byName indexes kinds by name.
var byName = index(kinds)

func index(table []kind) map[string]*kind {
	m := make(map[string]*kind, len(table))
	for i := range table {
		if _, dup := m[table[i].name]; dup {
			panic("hostlog: record kind " + table[i].name + " is in the table twice")
		}
		m[table[i].name] = &table[i]
	}
	return m
}

// Record is a host record with its body decoded.
type Record struct {
	journal.Record
	// Body is a pointer to the kind's body type (*ReserveV2 for
	// reserve.v2, ...).
	Body any
	kind *kind
}

// Visit hands the record to its kind's method of v.
func (r *Record) Visit(v Visitor) error { return r.kind.visit(v, r.Record, r.Body) }

// Decode decodes a host record's body by its kind, strictly
// (wire.Unmarshal), refusing a kind the host journal does not have. A
// journal's own record (bind, rebind) is no host record: nil, nil.
func Decode(r journal.Record) (*Record, error) {
	if r.Kind == "bind" || r.Kind == "rebind" {
		return nil, nil
	}
	k := byName[r.Kind]
	if k == nil {
		return nil, fmt.Errorf("unknown record kind %q", r.Kind)
	}
	body := k.newBody()
	if err := wire.Unmarshal(r.Body, body); err != nil {
		return nil, err
	}
	return &Record{Record: r, Body: body, kind: k}, nil
}

// Visit decodes r (Decode) and hands it to v; a journal's own record is
// passed over.
func Visit(v Visitor, r journal.Record) error {
	rec, err := Decode(r)
	if err != nil || rec == nil {
		return err
	}
	return rec.Visit(v)
}
