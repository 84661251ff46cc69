package controller

import (
	"fmt"
	"sort"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire/msg"
)

// One consent a requestId (DESIGN.md section 5, "One consent a
// requestId"): the controller consents to one attempt of an agent's
// requestId, and to a later attempt of it only after the earlier one
// ended with a receipt charging nothing (refused, not sent, released: the
// host's signed word that the consent bought nothing). A host that answered
// not-seen for an attempt it held a consent for, so that the requestId was
// consented again, shows in its export as two consented receipts for one
// requestId, the earlier of which performed the request: `receipts
// compare` finds it.

// consentsByRequest gathers the exported receipts that carry a consent, by
// the requestId the controller began their attempt with.
type consentsByRequest map[ledger.RequestName][]msg.Receipt

// add keeps rc when it carries a consent and its attempt was begun with a
// requestId (requests, by attempt).
func (m consentsByRequest) add(requests map[string]ledger.RequestName, rc msg.Receipt) {
	name, ok := requests[rc.Attempt]
	if !ok || rc.Consent == nil {
		return
	}
	m[name] = append(m[name], rc)
}

// spentOnNothing reports whether a receipt ended its attempt charging
// nothing and performing nothing: after it, a new attempt of the
// requestId is a new call, with its own consent.
func spentOnNothing(rc msg.Receipt) bool {
	switch rc.Outcome {
	case msg.StateRefused, msg.StateNotSent, msg.StateReleased:
		return rc.Charge == 0
	}
	return false
}

// findings names each requestId consented again after an attempt of it
// that did not end charging nothing, one line each, in the order of the
// requestIds' first receipts.
func (m consentsByRequest) findings() []string {
	var out []string
	type line struct {
		seq  uint64
		text string
	}
	var lines []line
	for name, rcs := range m {
		if len(rcs) < 2 {
			continue
		}
		sort.Slice(rcs, func(i, k int) bool { return rcs[i].Seq < rcs[k].Seq })
		for i, rc := range rcs[:len(rcs)-1] {
			if spentOnNothing(rc) {
				continue
			}
			next := rcs[i+1]
			lines = append(lines, line{rc.Seq, fmt.Sprintf("requestId %q of agent %s (application %s) was consented twice: attempt %s (receipt %d, %s, charge %d) and attempt %s (receipt %d, %s, charge %d); one consent a requestId",
				name.RequestID, name.Agent, name.Application, rc.Attempt, rc.Seq, outcomeOf(rc), rc.Charge, next.Attempt, next.Seq, outcomeOf(next), next.Charge)})
		}
	}
	sort.Slice(lines, func(i, k int) bool { return lines[i].seq < lines[k].seq })
	for _, l := range lines {
		out = append(out, l.text)
	}
	return out
}

// outcomeOf names a receipt's outcome; a version 1 receipt is an answer.
func outcomeOf(rc msg.Receipt) msg.State {
	if rc.Outcome == "" {
		return msg.StateDefinite
	}
	return rc.Outcome
}
