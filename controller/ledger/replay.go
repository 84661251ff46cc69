package ledger

import (
	"fmt"
	"sort"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// This file is the ledger's replay: reading the controller journal from
// its first record, at open (Replay; Uncertain for the installer) and for
// receipts compare (Receipts). apply is the one place that says what each
// record kind does to the index; the transitions it makes are the live
// index's own (ledger.go), so a replayed attempt follows the rules a live
// one does. What only memory held (a consent signed, a call in flight) is
// not on disk: an attempt replayed without an end is uncertain, or
// awaiting approval (the package doc says which).

// Replay rebuilds the ledger from every record of j (Apply for each).
// The controller opens through journal/history instead, which applies
// the records after its snapshot during the journal's one verifying scan;
// Replay is the whole-journal reading, for tests and tools.
func (l *Ledger) Replay(j *journal.Journal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return j.Iterate(1, func(r journal.Record) error { return l.apply(r) })
}

// Uncertain replays j into a new ledger and returns its uncertain
// attempts: what the installer refuses an enrollment over.
func Uncertain(j *journal.Journal) ([]Attempt, error) {
	l := New()
	if err := l.Replay(j); err != nil {
		return nil, err
	}
	return l.UncertainAttempts(), nil
}

// Apply applies one verified record of the controller journal, in order
// (history.State): the replay step of every kind in decoders, the
// journal's own bind and rebind records ignored. A kind this ledger does
// not know is refused, naming it: a newer controller wrote it, and
// replaying past it would rebuild a ledger that is not the journal's.
func (l *Ledger) Apply(r journal.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.apply(r)
}

// journalKinds are the journal's own records (package journal writes
// them; DESIGN.md section 4): they say nothing of attempts.
var journalKinds = map[string]bool{"bind": true, "rebind": true}

// decoders is the one table of what each record kind does to the ledger
// at replay: KindNames lists it, and the tests that must see every kind
// (the generator of a journal of every kind) derive their list from it.
var decoders = map[string]func(l *Ledger, r journal.Record) error{
	KindBegin:     (*Ledger).applyBegin,
	KindResult:    (*Ledger).applyResult,
	KindResolve:   (*Ledger).applyResolve,
	KindResolveV2: (*Ledger).applyResolveV2,
	KindAwaiting:  (*Ledger).applyAwaiting,
	KindConsented: (*Ledger).applyConsented,
	KindFgSubmit:  (*Ledger).applyFgSubmit,
	KindFgResult:  (*Ledger).applyFgResult,
	KindFgAck:     (*Ledger).applyFgAck,

	KindClockAccept: (*Ledger).applyClockAccept,
}

// KindNames lists the record kinds the ledger's replay knows, sorted.
func KindNames() []string {
	out := make([]string, 0, len(decoders))
	for k := range decoders {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// apply interprets one record; l.mu is held.
func (l *Ledger) apply(r journal.Record) error {
	if f := decoders[r.Kind]; f != nil {
		return f(l, r)
	}
	if journalKinds[r.Kind] {
		return nil
	}
	return fmt.Errorf("journal record %d has kind %q, which this controller's ledger does not know (written by a newer controller?)", r.Seq, r.Kind)
}

func (l *Ledger) applyBegin(r journal.Record) error {
	var b Begin
	if err := Decode(r, &b); err != nil {
		return err
	}
	if b.Day > l.day {
		l.day = b.Day
		clear(l.spent)
	}
	l.begin(b, r.Seq, false)
	return nil
}

func (l *Ledger) applyResult(r journal.Record) error {
	var res Result
	if err := Decode(r, &res); err != nil {
		return err
	}
	if endState(res.Outcome) != msg.StateUncertain {
		l.count(res.Attempt, res.Spent())
	} else if e := l.open[res.Attempt]; e != nil && res.Consented > 0 {
		e.consented = true // see ConsentKnown
	}
	return l.end(res.Attempt, endState(res.Outcome), res.Detail, r.Place, false, res.Denial(), true)
}

func (l *Ledger) applyResolve(r journal.Record) error {
	var res Resolve
	if err := Decode(r, &res); err != nil {
		return err
	}
	return l.resolved(res.upgrade(), r.Place, true)
}

func (l *Ledger) applyResolveV2(r journal.Record) error {
	var res ResolveV2
	if err := Decode(r, &res); err != nil {
		return err
	}
	return l.resolved(res, r.Place, true)
}

func (l *Ledger) applyAwaiting(r journal.Record) error {
	var a Awaiting
	if err := Decode(r, &a); err != nil {
		return err
	}
	l.awaiting(a)
	return nil
}

func (l *Ledger) applyConsented(r journal.Record) error {
	var c Consented
	if err := Decode(r, &c); err != nil {
		return err
	}
	l.consentRecorded(c)
	if e := l.open[c.Attempt]; e != nil && e.state == msg.StateAwaitingApproval {
		// Consented before the restart, no result: it may have been
		// reserved and delivered.
		l.setState(e, msg.StateUncertain, "consented after its approval, no result: pending inspection")
	}
	return nil
}

func (l *Ledger) applyFgSubmit(r journal.Record) error {
	var s FgSubmit
	if err := Decode(r, &s); err != nil {
		return err
	}
	l.fg[s.ID] = &fgEntry{tool: s.Tool, done: closedChan()}
	return nil
}

func (l *Ledger) applyFgResult(r journal.Record) error {
	var s FgResult
	if err := Decode(r, &s); err != nil {
		return err
	}
	if e := l.fg[s.ID]; e != nil {
		e.result = s.Result
	}
	return nil
}

func (l *Ledger) applyFgAck(r journal.Record) error {
	var s FgAck
	if err := Decode(r, &s); err != nil {
		return err
	}
	delete(l.fg, s.ID)
	return nil
}

// closedChan is the done of a foreground request that ended before this
// process: closed.
func closedChan() chan struct{} {
	d := make(chan struct{})
	close(d)
	return d
}

// Records is what Receipts reads: a journal (*journal.Journal), an
// archive of one (*journal.Archive), or both as one chain, each record in
// order from the first (from 1, or 0 for the first one held).
type Records interface {
	Iterate(from uint64, fn func(journal.Record) error) error
}

// Receipts reads the host's receipts the journal holds (in results and
// resolutions) by attempt, and every attempt it began with its request
// hash: what `steward-controller receipts compare` holds the host's export
// against. j is read from its first record: an archived journal is read
// with its archives (the controller's journalRecords).
func Receipts(j Records) (map[string][]byte, map[string][]byte, error) {
	r, err := ReadReceipts(j)
	return r.Recorded, r.Begun, err
}
