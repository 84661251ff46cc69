package operator

import "fmt"

// No one answers an ask of their own (DESIGN.md section 5, "Approvals").
// An account may be in both the agents' group and the approvers' group;
// the ask records the asking session's account (the controller's word,
// from SO_PEERCRED: msg.Dispatch.AgentUID), and a human answer from that
// very account is refused, as an advisor's answer to an ask its own agent
// name or its own account raised is. The refusal journals nothing: the
// ask keeps waiting for someone else.

// ownAccountRefusal is why the human answering as by ("uid:N") may not
// answer ask k, or "": the ask's call came from that account.
func (k *ask) ownAccountRefusal(by string) string {
	if k.AgentUID != "" && by == k.AgentUID {
		return fmt.Sprintf("%s raised ask %s: an approver never answers an ask of its own account", by, k.ID)
	}
	return ""
}

// advisorAccountRefusal is why an advisor session of account uid
// ("uid:N", "" when the controller did not say) may not answer ask k, or
// "": the same account raised it, whatever agent names either.
func (k *ask) advisorAccountRefusal(uid string) string {
	if uid != "" && uid == k.AgentUID {
		return "an advisor never answers an ask raised by its own identity"
	}
	return ""
}
