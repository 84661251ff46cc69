package ledger

import "github.com/stewardrt/steward/wire/msg"

// Sticky denials (DESIGN.md section 5, "Approvals"): an attempt whose ask
// was denied (by a human, an advisor, or its expiry or lapse to deny)
// ends with a refused result carrying the host's receipt. Unlike any
// other refusal, which reached no application and frees its requestId for
// a new attempt, a denial decides every later call with the same agent,
// application and requestId, with any arguments: that result, with its
// receipt, is the answer, and no new attempt begins, so no new ask is
// raised for what a human refused. In the history index a denial is the
// one refused entry that keeps its record's place (requests.go), so the
// index's form is unchanged.

// Denial reports whether r is the end of a denied ask: a refusal with
// code msg.CodeDenied whose verified receipt names the ask (Ask is set
// only from a receipt that verified).
func (r *Result) Denial() bool {
	return r.Outcome == msg.StateRefused && r.Refusal != nil && r.Refusal.Code == msg.CodeDenied && r.Receipt != nil && r.Ask != ""
}
