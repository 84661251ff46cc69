package views

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
