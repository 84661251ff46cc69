package operator

import (
	"errors"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The advisors' two requests on a controller's control channel (DESIGN.md
// section 5, "Approvals"): asks lists what an advisor may answer, advise
// takes its verdict. The controller is the channel's own (its socket's
// peer uid and tool key), never a name in the frame; the advisor in the
// frame is the agent the controller mapped from SO_PEERCRED on its
// advisor socket, which the host holds to the controller's limits
// records: only asks of that controller's agents that name it.

// answerAsks answers msg.Asks with the pending asks of controller that
// the advisor may answer (msg.AsksResult), or refuses (code
// msg.CodeApprovals) when no limits record names it an advisor.
func (h *Host) answerAsks(controller string, req *wire.Envelope) (string, any) {
	var q msg.Asks
	if err := req.Decode(&q); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "asks: " + err.Error()}
	}
	if err := validAgentName(q.Advisor); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "asks: " + refusalLine(err)}
	}
	asks, err := h.s.AdvisorAsks(controller, q.Advisor)
	if err != nil {
		var ar *AskRefusal
		if errors.As(err, &ar) {
			return msg.TypeRefused, ar.Refusal()
		}
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: "asks: " + err.Error()}
	}
	if asks == nil {
		asks = []msg.AskView{}
	}
	return msg.TypeAsksResult, msg.AsksResult{Asks: asks}
}

// answerAdvise answers msg.Advise with the ask as it stands after the
// advisor's verdict (msg.AdviseResult): a refusal by a bound or check is
// the result's Refused, not a refused frame, since the ask keeps waiting
// and the advisor is told why.
func (h *Host) answerAdvise(controller string, req *wire.Envelope) (string, any) {
	var ad msg.Advise
	if err := req.Decode(&ad); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "advise: " + err.Error()}
	}
	if !h.enter() {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host is shutting down; the ask is unchanged"}
	}
	defer h.leave()
	return msg.TypeAdviseResult, h.s.Advise(controller, ad)
}

// refusalLine is a refusal's reason without the ErrRefused prefix.
func refusalLine(err error) string {
	var ar *AskRefusal
	if errors.As(err, &ar) {
		return ar.Reason
	}
	s := err.Error()
	if p := ErrRefused.Error() + ": "; len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
