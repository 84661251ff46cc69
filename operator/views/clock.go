package views

import "time"

// ClockView is what `steward-operator clock accept` did: the wall clock
// it accepted as the store's time (At, RFC 3339 UTC), the latest time the
// store had recorded before (Was), and how many daily counts it moved
// from a day after At's day to At's day, keeping their counts (Grants:
// grants' daily counts; Agents: agents' days; Attempts: attempts whose
// reservation counted on such a day).
type ClockView struct {
	At       string `json:"at"`
	Was      string `json:"was"`
	Day      string `json:"day"` // At's UTC day, YYYY-MM-DD: the day counted from now on
	Grants   int    `json:"grants"`
	Agents   int    `json:"agents"`
	Attempts int    `json:"attempts"`
}

// NewClockView is the view of a clock accept to at from was (unix ms),
// its counts moved not yet counted.
func NewClockView(at, was int64) ClockView {
	return ClockView{At: Stamp(at), Was: Stamp(was), Day: time.UnixMilli(at).UTC().Format(time.DateOnly)}
}

// Stamp is a unix ms time as RFC 3339, UTC, to the second.
func Stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
