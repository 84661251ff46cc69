package controller

import "github.com/stewardrt/steward/journal"

// UncertainAttempts rebuilds the attempt index from an open controller
// journal and returns the attempts that are uncertain: begun, possibly
// sent, and never answered or resolved. steward-installer's
// controller-enroll holds the journal's lock while it asks, so that none
// can begin between the check and the rebind; any uncertain attempt blocks
// enrollment (DESIGN.md section 9).
func UncertainAttempts(j *journal.Journal) ([]Attempt, error) {
	l := newLedger()
	if err := l.rebuild(j); err != nil {
		return nil, err
	}
	return l.uncertain(), nil
}
