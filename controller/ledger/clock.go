package ledger

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
)

// KindClockAccept is `steward-controller clock accept`: the operator's
// word that the wall clock, whose UTC day is behind the latest day the
// journal recorded (a clock set forward and then corrected), is right.
const KindClockAccept = "clock-accept"

// ClockAccept sets the payer's day back to Day (days since the Unix
// epoch, UTC) from Was, the latest day recorded before it (Day < Was).
// Nothing refills: what the ended attempts of Was counted carries to Day,
// and an attempt not ended that was begun on a later day counts on Day
// (DESIGN.md section 5, "A clock set forward").
type ClockAccept struct {
	Day int64 `cbor:"day"`
	Was int64 `cbor:"was"`
}

func (l *Ledger) applyClockAccept(r journal.Record) error {
	var c ClockAccept
	if err := Decode(r, &c); err != nil {
		return err
	}
	if c.Day >= c.Was {
		return fmt.Errorf("a clock accept to day %d is not behind the day %d it names", c.Day, c.Was)
	}
	l.clockAccepted(c)
	return nil
}

// ClockAccepted applies a journaled clock-accept record.
func (l *Ledger) ClockAccepted(c ClockAccept) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clockAccepted(c)
}

// clockAccepted moves the latest day back to c.Day, keeping what was
// spent on it, and counts every open attempt begun on a later day on
// c.Day (its begin's day, as the ledger and its snapshot hold it; the
// journaled begin keeps its own). l.mu is held.
func (l *Ledger) clockAccepted(c ClockAccept) {
	l.day = c.Day
	for _, e := range l.open {
		if e.begin.Day > c.Day {
			e.begin.Day = c.Day
		}
	}
}
