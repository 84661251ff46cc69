package operator

import (
	"github.com/stewardrt/steward/wire/msg"
)

// A denial sticks (DESIGN.md section 5, "Approvals"). A collect of an
// attempt its ask's denial ended (denied, or expired or lapsed to deny)
// is answered with that same denial and the receipt its refused record
// holds, not refused as a duplicate: a controller killed after the host
// ended the attempt and before it journaled the answer collects again
// after its restart, and must learn the denial with its receipt, which
// then decides the requestId for good. Nothing is journaled, reserved or
// consented here: the record is only read back.

// collectDenied answers a collect by controller ctrl of attempt id when a
// denial ended it: ok false for every other attempt, which Collect
// answers as it always did.
func (s *Store) collectDenied(ctrl, id string) (msg.DispatchResult, bool) {
	s.mu.Lock()
	a, err := s.st.attemptOf(id)
	if err != nil || a == nil || a.Controller != ctrl || a.State != msg.StateRefused || a.Ask == "" || a.EndAt.Seq == 0 {
		s.mu.Unlock()
		return msg.DispatchResult{}, false
	}
	k, err := s.st.askOf(a.Ask)
	if err != nil || k == nil || k.Verdict != msg.VerdictDeny || k.Attempt != id {
		s.mu.Unlock()
		return msg.DispatchResult{}, false
	}
	_, agentWhy := deniedReasons(k)
	end := a.EndAt
	s.mu.Unlock()
	out, err := s.endRecord(end, id)
	if err != nil || out.Receipt == nil {
		s.log.Error("steward-operator: reading back the receipt of a denied attempt", "attempt", id, "err", err)
		return msg.DispatchResult{Attempt: id, Outcome: msg.StateRefused,
			Refusal: &msg.Refusal{Code: msg.CodeInternal, Reason: "the host could not read back the denial of attempt " + id + "; nothing was done: collect again"}}, true
	}
	return msg.DispatchResult{Attempt: id, Outcome: msg.StateRefused, Refusal: &msg.Refusal{Code: msg.CodeDenied, Reason: agentWhy}, Receipt: out.Receipt}, true
}
