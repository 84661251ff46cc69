package hostlog

import "fmt"

// ClockAccept is `steward-operator clock accept` (DESIGN.md section 5, "A
// clock set forward"). The store's clock never reads earlier than the
// latest time it recorded (so that a clock set back refills no daily
// count and revives no expired grant); a clock set forward and then
// corrected would keep the far-future time until real time caught up.
// The record is the operator's word that the wall clock, behind that
// latest time, is right: the store's time is At from it on. Nothing
// refills: each daily count of a day after At's day (a grant's, an
// agent's with its conversations, the day an attempt not yet ended
// counted its reservation on) moves to At's day keeping its count. Asks
// keep their absolute times: an answered or expired ask stays as it is,
// and a pending one expires at its recorded expiry.
//
// At is the accepted time and Was the latest time before it (unix ms,
// At < Was); By is who asked ("uid:N").
type ClockAccept struct {
	At  int64  `cbor:"at"`
	Was int64  `cbor:"was"`
	By  string `cbor:"by,omitempty"`
}

// Check refuses a clock accept that is not behind the time it names:
// replay and the audit refuse such a record.
func (c *ClockAccept) Check() error {
	if c.At >= c.Was {
		return fmt.Errorf("a clock accept at %d is not behind the latest time %d it names", c.At, c.Was)
	}
	return nil
}
