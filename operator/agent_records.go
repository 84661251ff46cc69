package operator

import (
	"bytes"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The operator's limits per agent (DESIGN.md section 5, "The operator's
// limits per agent") are records of their own, not fields of a grant: a
// grant is per application and controller, while an agent's limits span
// every application its controller reaches, and the approvals issue adds
// its field to them. Each is a signed msg.AgentLimits (the operator's
// hybrid key, as a grant), journaled as one agent-limits record; a new
// record for the same controller and agent has the next revision and
// replaces the one before it.

// agentKey names one agent of one controller.
type agentKey struct{ Controller, Agent string }

// agentLimits is an agent's selected limits record and its signed bytes.
type agentLimits struct {
	Limits msg.AgentLimits
	Signed []byte
}

// checkAgentLimits verifies a signed limits record for the store: signed
// by the operator, within the bounds, of a pinned controller, and the next
// revision of its agent's records.
func (st *state) checkAgentLimits(signed []byte, pub *wire.HybridPublicKey) (msg.AgentLimits, error) {
	l, err := msg.VerifyAgentLimits(signed, pub)
	if err != nil {
		return l, views.Refusedf("%v", err)
	}
	if err := hostlog.ValidAgentLimits(&l); err != nil {
		return l, refusedInput(err)
	}
	if _, ok := st.Controllers[l.Controller]; !ok {
		return l, views.Refusedf("agent %s: no controller named %s", l.Agent, l.Controller)
	}
	var want uint64 = 1
	if prev := st.Agents[agentKey{l.Controller, l.Agent}]; prev != nil {
		want = prev.Limits.Revision + 1
	}
	if l.Revision != want {
		return l, views.Refusedf("agent %s of controller %s: revision %d must be %d", l.Agent, l.Controller, l.Revision, want)
	}
	return l, nil
}

// addAgentLimits selects l as its agent's limits.
func (st *state) addAgentLimits(l msg.AgentLimits, signed []byte) {
	k := agentKey{l.Controller, l.Agent}
	if st.Agents[k] == nil {
		st.AgentOrder = append(st.AgentOrder, k)
	}
	st.Agents[k] = &agentLimits{Limits: l, Signed: bytes.Clone(signed)}
}

func (rp *replayer) AgentLimits(_ journal.Record, b *hostlog.AgentLimits) error {
	l, err := rp.st.checkAgentLimits(b.Limits, rp.pub)
	if err != nil {
		return err
	}
	rp.st.addAgentLimits(l, b.Limits)
	return nil
}
