package ledger

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// This file is the ledger's live index: the attempts that have not ended,
// the latest attempt of each agent's application requestId, the payer's
// day, and the transitions between their states, under one lock. The
// running controller drives it through the exported methods; replay.go
// drives the same transitions from the journal at open, so that one set
// of rules says what an attempt is, live or replayed. With a history
// index (requests.go), a requestId whose attempt ended lives there, not
// here.

// Attempt is one attempt as the journal shows it.
type Attempt struct {
	ID          string    `json:"id"`
	Tool        string    `json:"tool"`
	Application string    `json:"application"`
	Operation   string    `json:"operation,omitempty"`
	RequestID   string    `json:"requestId,omitempty"`
	Agent       string    `json:"agent,omitempty"` // Begin.Owner: the agent that made the call
	Route       string    `json:"route"`
	Kind        string    `json:"kind"`
	State       msg.State `json:"state"`
	Detail      string    `json:"detail,omitempty"`
	BeginSeq    uint64    `json:"beginSeq"`
}

// Prior is what the ledger knows of the latest earlier attempt of the same
// agent with the same application requestId, when it decides a new call
// (see Begin).
type Prior struct {
	Attempt     string
	State       msg.State // StateDefinite, StatePending, StateAwaitingApproval, StateUncertain, or the operator's StateReleased or StatePerformed
	SameRequest bool      // the same request hash as the new call
	// Answer is where the record holding the definite answer (or the
	// operator's resolution) is, for journal.ReadAt.
	Answer journal.Place
	// Unscoped: the earlier attempt was begun before agents, its body
	// carrying the agent's requestId itself, so SameRequest compares
	// bodies that differ in the id; RequestSHA256 is its hash, for the
	// caller to compare with the new call's request built the old way.
	Unscoped      bool
	RequestSHA256 [32]byte
	// Ask is the ask an attempt awaiting approval waits on (its awaiting
	// record), for a call again to collect its verdict.
	Ask string
	// Denied: the attempt (State StateRefused) was refused because its ask
	// was denied; Answer is its result record, which answers the call.
	Denied bool
	// Err is set when the history index could not be read: nothing is
	// known of the requestId, so the call is refused (Begin's ok is
	// false) and nothing is registered.
	Err error
}

// Ledger is the in-memory index of the controller journal: the attempts
// that have not ended, the latest attempt of each application requestId,
// and the foreground requests not yet acknowledged. The controller keeps
// one while it runs; Apply (history.Open's replay) or Replay rebuilds it
// at start.
//
// With a history index (NewIndexed), a replayed requestId whose attempt
// ended is put into the index and leaves memory; one that ends while the
// controller runs stays in memory until Forget, after the keeper's next
// snapshot has synced the index past it. Without one (New), memory is
// the only index and keeps every requestId (tests, tools that replay a
// whole journal); a ledger only read (the read-only commands, the
// installer) is NewIndexed(Discard()), which keeps none.
type Ledger struct {
	// mu guards every field below. Each method takes it once and never
	// holds it across a journal append, a signature or a network call, so
	// it orders nothing but these maps. Begin holds it across its read of
	// the history index: the dedup decision and the registration of the
	// new attempt must be one step, and a read of a local file is bounded.
	mu    sync.Mutex
	open  map[string]*entry    // by attempt id: pending, awaiting approval or uncertain
	byReq map[reqKey]*reqEntry // by (agent, application, requestId): the live ones, and those ended since the last Forget
	fg    map[string]*fgEntry  // by foreground request id
	idx   Index                // the history index; nil: memory is the index
	// day is the latest Begin.Day recorded, and spent what the ended
	// attempts of that day count against each principal (Result.Spent,
	// Resolve.Charge): what Replay found, for the payer's budget.
	day   int64
	spent map[string]uint64
}

// entry is an attempt that has not ended.
type entry struct {
	begin     Begin
	beginSeq  uint64
	state     msg.State // StatePending, StateAwaitingApproval or StateUncertain
	detail    string
	live      bool      // begun by this process: the only attempts consented to, but for those awaiting approval
	consented bool      // a consent was signed for it (by this process; replayed, its uncertain result says so)
	replaced  *reqEntry // the requestId entry this begin replaced, for Abort
	// ask is the ask of its awaiting record, "" when it never awaited
	// approval; recorded, that its consented record is journaled, and
	// amount what that record says was consented at most.
	ask      string
	recorded bool
	amount   uint64
}

// reqKey is what an attempt is found by: its agent (Begin.Owner), its
// application and the agent's requestId. The same requestId from two
// agents is two attempts, and nothing of one agent's decides another's.
type reqKey struct{ agent, application, requestID string }

func keyOf(b *Begin) reqKey { return reqKey{b.Owner(), b.Application, b.RequestID} }

// reqEntry is the latest attempt for one agent's application requestId.
type reqEntry struct {
	attempt  string
	sha      [32]byte
	path     string // the request's path: its route's prefix, for a replay the host is not asked for (Decided)
	route    string // its route's name
	unscoped bool   // begun before agents: its body carries the requestId itself
	state    msg.State
	ask      string        // its awaiting record's ask
	answer   journal.Place // the record (result or resolve) holding the definite answer, or the operator's resolution; zero when none
	// byOperator: the host's operator resolved it (released or performed),
	// and the record at answer says so to every later call.
	byOperator bool
	// denied: it ended refused because its ask was denied (or expired or
	// lapsed to deny), and the result at answer, with its receipt, is the
	// answer of every later call with its requestId (approval_denied.go).
	denied bool
	// endSeq is the record that ended the attempt (it left the open
	// attempts), 0 while it is open: Forget drops the entry once the index
	// is synced past it.
	endSeq uint64
}

// New returns an empty ledger without a history index: memory keeps every
// requestId.
func New() *Ledger {
	return &Ledger{open: map[string]*entry{}, byReq: map[reqKey]*reqEntry{}, fg: map[string]*fgEntry{}, spent: map[string]uint64{}}
}

// NewIndexed returns an empty ledger whose replayed requestIds that ended
// go into idx (see Ledger).
func NewIndexed(idx Index) *Ledger {
	l := New()
	l.idx = idx
	return l
}

// public is the open attempt e as the ledger shows it.
func (e *entry) public() Attempt { return AttemptOf(&e.begin, e.beginSeq, e.state, e.detail) }

// AttemptOf is the attempt b began (its begin record at beginSeq) as the
// journal shows it, in state with detail: the one place a begin is read as
// an Attempt, for an open attempt and for one that ended alike.
func AttemptOf(b *Begin, beginSeq uint64, state msg.State, detail string) Attempt {
	return Attempt{
		ID: b.Attempt, Tool: b.Tool, Application: b.Application,
		Operation: b.Operation, RequestID: b.RequestID, Agent: b.Owner(), Route: b.Route,
		Kind: b.Kind, State: state, Detail: detail, BeginSeq: beginSeq,
	}
}

// count adds what an ending attempt spent to its principal's day, when
// that is the latest day; l.mu is held.
func (l *Ledger) count(id string, amount uint64) {
	if e := l.open[id]; e != nil && e.begin.Principal != "" && e.begin.Day == l.day {
		l.spent[e.begin.Principal] += amount
	}
}

// Spending is what the journal says of the latest day recorded: its day
// (0 when no begin names one), what each principal's ended attempts spent
// on it, and how many of each principal's attempts on it were found at
// start without an end (unsettled: whether and how much they were
// consented to is not on disk, so the payer counts each at its ceiling).
// An attempt found awaiting approval counts nothing (it was never
// consented to), and one consented to after its approval counts, in
// spent, the amount its consented record says. Begins written before the
// payer policy name no principal and count for nobody.
func (l *Ledger) Spending() (day int64, spent map[string]uint64, unsettled map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	spent, unsettled = map[string]uint64{}, map[string]int{}
	for p, n := range l.spent {
		spent[p] = n
	}
	for _, e := range l.open {
		switch {
		case e.live || e.begin.Principal == "" || e.begin.Day != l.day || e.state == msg.StateAwaitingApproval:
		case e.recorded:
			spent[e.begin.Principal] += e.amount
		default:
			unsettled[e.begin.Principal]++
		}
	}
	return l.day, spent, unsettled
}

// endState is the state a dispatch outcome leaves an attempt in: an
// outcome the ledger does not know leaves it uncertain.
func endState(outcome msg.State) msg.State {
	switch outcome {
	case msg.StateDefinite, msg.StateRefused, msg.StateNotSent:
		return outcome
	default:
		return msg.StateUncertain
	}
}

// begin records a begin; live says it was begun by this process. l.mu is
// held.
func (l *Ledger) begin(b Begin, seq uint64, live bool) {
	e := &entry{begin: b, beginSeq: seq, state: msg.StatePending, live: live}
	if !live {
		e.state, e.detail = msg.StateUncertain, "begin journaled, no result: pending inspection"
	}
	l.open[b.Attempt] = e
	if b.RequestID != "" {
		key := keyOf(&b)
		if live {
			// Only Abort reads it, of an attempt this process began: a
			// replayed one keeps no pointer to history.
			e.replaced = l.byReq[key]
		}
		var sha [32]byte
		copy(sha[:], b.RequestSHA256)
		l.byReq[key] = &reqEntry{attempt: b.Attempt, sha: sha, path: b.Path, route: b.Route, unscoped: b.ScopedRequestID == "", state: e.state}
	}
	if b.Foreground != "" {
		if f := l.fg[b.Foreground]; f != nil {
			f.attempt = b.Attempt
		}
	}
}

// awaiting records an attempt's awaiting record: it awaits approval
// unless its consent was recorded (or it ended) since. l.mu is held.
func (l *Ledger) awaiting(a Awaiting) {
	e := l.open[a.Attempt]
	if e == nil {
		return
	}
	e.ask = a.Ask
	if !e.recorded {
		l.setState(e, msg.StateAwaitingApproval, "awaiting approval (ask "+a.Ask+")")
	}
	if q := l.reqOf(e); q != nil {
		q.ask = a.Ask
	}
}

// consentRecorded records an attempt's consented record. l.mu is held.
func (l *Ledger) consentRecorded(c Consented) {
	if e := l.open[c.Attempt]; e != nil {
		e.recorded, e.amount = true, c.Amount
	}
}

// setState sets an open attempt's state, and its requestId's while it is
// that attempt's. l.mu is held.
func (l *Ledger) setState(e *entry, state msg.State, detail string) {
	e.state, e.detail = state, detail
	if q := l.reqOf(e); q != nil {
		q.state = state
	}
}

// reqOf is the requestId entry of e's attempt while it is the latest one;
// l.mu is held.
func (l *Ledger) reqOf(e *entry) *reqEntry {
	if e.begin.RequestID == "" {
		return nil
	}
	if q := l.byReq[keyOf(&e.begin)]; q != nil && q.attempt == e.begin.Attempt {
		return q
	}
	return nil
}

// end moves an attempt to state; an uncertain one stays open. The record
// at place says so; byOperator marks a resolution the host's operator
// decided. replay says the record is replayed (Apply): with an index, the
// requestId of an attempt that ended then goes into it and leaves memory.
// l.mu is held.
func (l *Ledger) end(id string, state msg.State, detail string, place journal.Place, byOperator, denied, replay bool) error {
	e := l.open[id]
	if e == nil {
		return nil
	}
	if state == msg.StateUncertain {
		e.state, e.detail = state, detail
	} else {
		delete(l.open, id)
	}
	q := l.reqOf(e)
	if q == nil {
		return nil
	}
	q.state = state
	if state == msg.StateDefinite || byOperator || denied {
		q.answer = place
	}
	q.byOperator = q.byOperator || byOperator
	q.denied = q.denied || denied
	if state == msg.StateUncertain {
		return nil
	}
	q.endSeq = place.Seq
	if !replay || l.idx == nil {
		return nil
	}
	key := keyOf(&e.begin)
	if err := l.putReq(key, q); err != nil {
		return err
	}
	delete(l.byReq, key)
	return nil
}

// Begin registers b, about to be journaled by this process, unless the
// latest earlier attempt of the same agent (Begin.Owner) with the same
// application requestId decides the call instead: definite (replay it, or a conflict), pending (in flight),
// uncertain (refused until resolved), or resolved by the host's operator
// (released or performed: answered from the resolution). Then it returns
// that attempt and false, and registers nothing. An attempt that ended
// refused, not-sent, abandoned or released by the host's not-sent record
// reached no application: a new one may begin.
func (l *Ledger) Begin(b Begin) (Prior, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.RequestID != "" {
		q, err := l.lookup(keyOf(&b))
		if err != nil {
			return Prior{Err: err}, false
		}
		if q != nil && q.decides() {
			return Prior{Attempt: q.attempt, State: q.state, SameRequest: bytes.Equal(q.sha[:], b.RequestSHA256), Answer: q.answer,
				Unscoped: q.unscoped, RequestSHA256: q.sha, Ask: q.ask, Denied: q.denied}, false
		}
	}
	l.begin(b, 0, true)
	return Prior{}, true
}

// decides reports whether the attempt decides a later call with its
// requestId: it answered, is in flight, awaits approval, is uncertain,
// was denied, or was resolved by the host's operator.
func (q *reqEntry) decides() bool {
	switch q.state {
	case msg.StateDefinite, msg.StatePending, msg.StateAwaitingApproval, msg.StateUncertain:
		return true
	}
	return q.byOperator || q.denied
}

// Decided reports whether agent's latest attempt of application app with
// requestID decides a new call with that requestId without anything being
// sent (Begin would return it: definite, pending, uncertain, or resolved by
// the host's operator), and then the path and route name its request was
// built with. A controller that cannot reach the host for the route's live
// record can still answer such a call: a replay needs no route.
// An index that cannot be read decides nothing here: Begin refuses the
// call then.
func (l *Ledger) Decided(agent, app, requestID string) (path, route string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, err := l.lookup(reqKey{agent, app, requestID})
	if err != nil || q == nil || !q.decides() {
		return "", "", false
	}
	return q.path, q.route, true
}

// Abort undoes a Begin whose record could not be journaled: the attempt is
// forgotten and its requestId points at the attempt before it again.
func (l *Ledger) Abort(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.open[id]
	if e == nil {
		return
	}
	delete(l.open, id)
	if e.begin.RequestID == "" {
		return
	}
	key := keyOf(&e.begin)
	if q := l.byReq[key]; q != nil && q.attempt == id {
		if e.replaced != nil {
			l.byReq[key] = e.replaced
		} else {
			delete(l.byReq, key)
		}
	}
}

// Journaled records the sequence number of an attempt's begin.
func (l *Ledger) Journaled(id string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.open[id]; e != nil {
		e.beginSeq = seq
	}
}

// Finish applies a journaled result, at place.
func (l *Ledger) Finish(r Result, place journal.Place) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end(r.Attempt, endState(r.Outcome), r.Detail, place, false, r.Denial(), false) // live: no index write, no error
}

// Unfinished marks an attempt uncertain whose result could not be
// journaled: it may have been performed, and nothing says so on disk.
func (l *Ledger) Unfinished(id, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end(id, msg.StateUncertain, detail, journal.Place{}, false, false, false) // uncertain: stays open, no error
}

// Resolved applies a journaled resolution, at place.
func (l *Ledger) Resolved(r ResolveV2, place journal.Place) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resolved(r, place, false) // live: no index write, no error
}

// resolved applies a resolution; l.mu is held. A resolution the host's
// operator decided answers the requestId from its record, as a definite
// answer does.
func (l *Ledger) resolved(r ResolveV2, place journal.Place, replay bool) error {
	l.count(r.Attempt, r.Charge)
	return l.end(r.Attempt, r.State, "resolved by "+r.By, place, r.ByOperator(), false, replay)
}

// Open returns an attempt that has not ended, with its begin.
func (l *Ledger) Open(id string) (Attempt, Begin, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.open[id]
	if e == nil {
		return Attempt{}, Begin{}, false
	}
	return e.public(), e.begin, true
}

// Consent marks attempt as consented to for r, once, after checking that r
// asks for exactly what this process journaled in its begin for controller
// and that approve (the payer's policy, given the begin) allows it; approve
// runs with the ledger's lock held, so two reserves of one attempt cannot
// both pass it. A refusal is a *msg.Refusal. Attempts found at start are
// never consented to: whether they were before the restart cannot be known.
// The exception is an attempt awaiting approval, which this process or the
// one before it journaled an awaiting record for and no consented record:
// nothing of it was reserved, and it is consented to once, whenever its
// approval comes (the caller journals its consented record before the
// consent leaves: NeedsConsentRecord).
func (l *Ledger) Consent(r msg.Reserve, controller string, approve func(Begin) *msg.Refusal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.open[r.Attempt]
	awaiting := e != nil && e.state == msg.StateAwaitingApproval
	switch {
	case e == nil:
		return refusal(msg.CodeUnknown, "no journaled begin for attempt %s", r.Attempt)
	case !e.live && !awaiting:
		return refusal(msg.CodeNoConsent, "attempt %s predates this controller process and is pending inspection", r.Attempt)
	case e.state != msg.StatePending && !awaiting:
		return refusal(msg.CodeNoConsent, "attempt %s is %s", r.Attempt, e.state)
	case e.consented:
		return refusal(msg.CodeDuplicate, "attempt %s was already consented to", r.Attempt)
	case r.Controller != controller || r.Application != e.begin.Application ||
		r.Operation != e.begin.Operation || !bytes.Equal(r.RequestSHA256, e.begin.RequestSHA256):
		return refusal(msg.CodeNoConsent, "reserve for attempt %s does not match its journaled begin", r.Attempt)
	}
	if approve != nil {
		if ref := approve(e.begin); ref != nil {
			return ref
		}
	}
	e.consented = true
	return nil
}

// NeedsConsentRecord reports whether a consent to attempt id must be
// journaled (a consented record) before it leaves: the attempt has an
// awaiting record. Every other attempt's consent needs no record.
func (l *Ledger) NeedsConsentRecord(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.open[id]
	return e != nil && e.ask != "" && !e.recorded
}

// AskOf is the ask an open attempt's awaiting record names; "" when it
// has none (it never awaited approval, or it has ended).
func (l *Ledger) AskOf(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.open[id]; e != nil {
		return e.ask
	}
	return ""
}

// Awaited records a journaled awaiting record of an attempt this process
// dispatched: it now awaits approval.
func (l *Ledger) Awaited(a Awaiting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.awaiting(a)
}

// ConsentRecorded records a journaled consented record.
func (l *Ledger) ConsentRecorded(c Consented) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.consentRecorded(c)
}

func refusal(code, format string, a ...any) *msg.Refusal {
	return &msg.Refusal{Code: code, Reason: fmt.Sprintf(format, a...)}
}

// UncertainAttempts lists the open attempts that are not in flight, by
// begin seq; never nil. An attempt awaiting approval is not uncertain.
func (l *Ledger) UncertainAttempts() []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []Attempt{}
	for _, e := range l.open {
		if e.state == msg.StateUncertain {
			out = append(out, e.public())
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].BeginSeq < out[k].BeginSeq })
	return out
}
