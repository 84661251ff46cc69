package operator

import "github.com/stewardrt/steward/wire/msg"

// DeniedEnd is the end of controller ctrl's attempt id when a denial
// ended it (DESIGN.md section 5, "Collect"): that denial and the receipt
// its refused record holds, which a collect and an inspect answer (a
// denial sticks for a controller that lost it), journaling nothing.
func (s *Store) DeniedEnd(ctrl, id string) (msg.DispatchResult, bool) {
	s.mu.Lock()
	a, err := s.st.attemptOf(id)
	var k *ask
	if err == nil && a != nil && a.Controller == ctrl && a.State == msg.StateRefused && a.Ask != "" && a.EndAt.Seq != 0 {
		k, err = s.st.askOf(a.Ask)
	}
	s.mu.Unlock()
	if err != nil || k == nil || k.Verdict != msg.VerdictDeny || k.Attempt != id {
		return msg.DispatchResult{}, false
	}
	_, why := deniedReasons(k)
	out, err := s.endRecord(a.EndAt, id)
	if err != nil || out.Receipt == nil {
		s.log.Error("steward-operator: reading back the receipt of a denied attempt", "attempt", id, "err", err)
		why, out.Receipt = "the host could not read back the denial of attempt "+id+"; nothing was done: collect again", nil
	}
	return msg.DispatchResult{Attempt: id, Outcome: msg.StateRefused, Refusal: &msg.Refusal{Code: msg.CodeDenied, Reason: why}, Receipt: out.Receipt}, true
}
