package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The control socket: one per controller, beside the routes' forward
// sockets (msg/control.go). It is the controller's channel to the host
// that no route owns: its live route table (routes), the host's record of
// an attempt (inspect) and an agent's allowance (allowance). A controller
// with no route still has it, so a route the operator registers later is
// found there without restarting either daemon. It is bound like a forward
// socket: mode 0660, SO_PEERCRED uid the controller's, the forward caps, a
// signed refusal frame past them; the handshake is the forward socket's
// (RoleHost, the controller's tool key) with PurposeControl. The running
// host's set of them is controls.go's: `controller add` and `controller
// control` change it at once.

// controlHandler answers routes, inspect, allowance, and the advisors'
// asks and advise (ask_control.go) on one controller's
// control channel. The controller is the channel's (its socket's peer
// uid and tool key), never a name in a frame.
func (h *Host) controlHandler(controller string) wire.Handler {
	return fitReplies(wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		switch req.T {
		case msg.TypeRoutes:
			return h.answerRoutes(controller, req)
		case msg.TypeRoutesWatch:
			return h.answerRoutesWatch(ctx, controller, req)
		case msg.TypeInspect:
			return h.answerInspect(controller, req)
		case msg.TypeAllowance:
			return h.answerAllowance(controller, req)
		case msg.TypeAsks:
			return h.answerAsks(controller, req)
		case msg.TypeAdvise:
			return h.answerAdvise(controller, req)
		default:
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: fmt.Sprintf("unknown request type %q on a control socket", req.T)}
		}
	}))
}

// answerRoutes is the routes answer (msg.RoutesResult): the RouteIDs of
// the controller's active routes in the host's order, and the signed
// records of those the controller did not say it knows. Routes of other
// controllers are never in it.
func (h *Host) answerRoutes(controller string, req *wire.Envelope) (string, any) {
	var q msg.Routes
	if err := req.Decode(&q); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "routes: " + err.Error()}
	}
	if len(q.Known) > msg.MaxKnownRoutes {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest,
			Reason: fmt.Sprintf("routes: %d known route ids, the bound is %d", len(q.Known), msg.MaxKnownRoutes)}
	}
	known := make(map[string]bool, len(q.Known))
	for _, id := range q.Known {
		known[string(id)] = true
	}
	return msg.TypeRoutesResult, h.s.RouteTable(controller, known)
}

// answerInspect is the inspect answer of a forward or control channel:
// the host's record of one of the controller's attempts.
func (h *Host) answerInspect(controller string, req *wire.Envelope) (string, any) {
	var in msg.Inspect
	if err := req.Decode(&in); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "inspect: " + err.Error()}
	}
	res, err := h.s.Inspect(controller, in.Attempt)
	if errors.Is(err, journal.ErrArchived) {
		// Its records are archived: the reason names the archive only.
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeArchived, Reason: strings.TrimPrefix(err.Error(), views.ErrRefused.Error()+": ")}
	}
	if err != nil {
		// The error names the journal's files: they go to the log, not
		// to the controller and its agents.
		h.log.Error("steward-operator: inspect: reading the host journal", "attempt", in.Attempt, "err", err)
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeJournal, Reason: inspectUnreadable}
	}
	if res.State == msg.StateRefused {
		if d, ok := h.s.DeniedEnd(controller, in.Attempt); ok && d.Receipt != nil {
			res.Refusal = d.Refusal // a denial: the controller records it as one
		}
	}
	return msg.TypeInspectResult, res
}

// answerAllowance is the allowance answer of a forward or control channel:
// what one agent of the controller may still spend and call.
func (h *Host) answerAllowance(controller string, req *wire.Envelope) (string, any) {
	var al msg.Allowance
	if err := req.Decode(&al); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "allowance: " + err.Error()}
	}
	if err := hostlog.ValidDispatchAgent(al.Agent); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "allowance: " + err.Error()}
	}
	return msg.TypeAllowanceResult, h.s.Allowance(controller, al.Agent)
}

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
	if err := hostlog.ValidAgentName(q.Advisor); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "asks: " + refusalLine(err)}
	}
	asks, next, err := h.s.AdvisorAsksPage(controller, q.Advisor, q.After)
	if err != nil {
		var ar *operator.AskRefusal
		if errors.As(err, &ar) {
			return msg.TypeRefused, ar.Refusal()
		}
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: "asks: " + err.Error()}
	}
	if asks == nil {
		asks = []msg.AskView{}
	}
	return msg.TypeAsksResult, msg.AsksResult{Asks: asks, Next: next}
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
	var ar *operator.AskRefusal
	if errors.As(err, &ar) {
		return ar.Reason
	}
	s := err.Error()
	if p := views.ErrRefused.Error() + ": "; len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
