package operator

import "github.com/stewardrt/steward/wire/msg"

// An attempt being admitted holds its reservation in memory (the purse's
// hold and its daily counts) from admission until its reserve or refused
// record, and from the payer's reply on it holds the payer's consent too.
// Inspect never answers not-seen for it: a controller that read not-seen
// could end the attempt abandoned and consent again to a new attempt of
// its requestId, while the host still holds the first consent, which it
// may yet use (two consents, one call). It answers pending: the attempt
// stays uncertain on the controller until the host records its end. Only
// an attempt admitted to wait for approval (it holds nothing until its ask
// is journaled, and no consent is asked for it before a collect) is
// not-seen while it is admitted (DESIGN.md section 5, "One consent a
// requestId").

// admittingDetail is inspect's line for an attempt being admitted.
const admittingDetail = "being admitted: the host holds its reservation and waits for, or holds, the payer's consent"

// holdsReservation reports whether an attempt being admitted holds a
// reservation: admitLocked names its grant when it takes the purse's hold,
// and not for an attempt admitted to wait for approval.
func (a *attempt) holdsReservation() bool { return a.Grant != "" }

// admittingInspect is inspect's answer for an attempt being admitted with
// its reservation held.
func admittingInspect(id string) msg.InspectResult {
	return msg.InspectResult{Attempt: id, State: msg.StatePending, Detail: admittingDetail}
}
