package ledger

import (
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

// Replay rebuilds the ledger from every record of j. Every begin without a
// result or resolution is uncertain.
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

// apply interprets one record; l.mu is held.
func (l *Ledger) apply(r journal.Record) error {
	switch r.Kind {
	case KindBegin:
		var b Begin
		if err := Decode(r, &b); err != nil {
			return err
		}
		if b.Day > l.day {
			l.day = b.Day
			clear(l.spent)
		}
		l.begin(b, r.Seq, false)
	case KindResult:
		var res Result
		if err := Decode(r, &res); err != nil {
			return err
		}
		if endState(res.Outcome) != msg.StateUncertain {
			l.count(res.Attempt, res.Spent())
		}
		l.end(res.Attempt, endState(res.Outcome), res.Detail, r.Seq)
	case KindResolve:
		var res Resolve
		if err := Decode(r, &res); err != nil {
			return err
		}
		l.resolved(res.upgrade(), r.Seq)
	case KindResolveV2:
		var res ResolveV2
		if err := Decode(r, &res); err != nil {
			return err
		}
		l.resolved(res, r.Seq)
	case KindAwaiting:
		var a Awaiting
		if err := Decode(r, &a); err != nil {
			return err
		}
		l.awaiting(a)
	case KindConsented:
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
	case KindFgSubmit:
		var s FgSubmit
		if err := Decode(r, &s); err != nil {
			return err
		}
		d := make(chan struct{})
		close(d)
		l.fg[s.ID] = &fgEntry{tool: s.Tool, done: d}
	case KindFgResult:
		var s FgResult
		if err := Decode(r, &s); err != nil {
			return err
		}
		if e := l.fg[s.ID]; e != nil {
			e.result = s.Result
		}
	case KindFgAck:
		var s FgAck
		if err := Decode(r, &s); err != nil {
			return err
		}
		delete(l.fg, s.ID)
	}
	return nil
}

// Receipts reads the host's receipts the journal holds (in results and
// resolutions) by attempt, and every attempt it began with its request
// hash: what `steward-controller receipts compare` holds the host's export
// against.
func Receipts(j *journal.Journal) (map[string][]byte, map[string][]byte, error) {
	recorded, begun := map[string][]byte{}, map[string][]byte{}
	err := j.Iterate(1, func(r journal.Record) error {
		switch r.Kind {
		case KindBegin:
			var b Begin
			if err := Decode(r, &b); err != nil {
				return err
			}
			begun[b.Attempt] = b.RequestSHA256
		case KindResult:
			var res Result
			if err := Decode(r, &res); err != nil {
				return err
			}
			if res.Receipt != nil {
				recorded[res.Attempt] = res.Receipt
			}
		case KindResolve:
			var res Resolve
			if err := Decode(r, &res); err != nil {
				return err
			}
			if res.Receipt != nil {
				recorded[res.Attempt] = res.Receipt
			}
		case KindResolveV2:
			var res ResolveV2
			if err := Decode(r, &res); err != nil {
				return err
			}
			if res.Receipt != nil {
				recorded[res.Attempt] = res.Receipt
			}
		}
		return nil
	})
	return recorded, begun, err
}
