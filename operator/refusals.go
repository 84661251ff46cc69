package operator

import (
	"fmt"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The host's refusals reach the agent through the controller: they name
// the limit that refused and, where it is known, when it refills, and the
// call in the agent's own terms (its operation and application). They
// never carry the controller's name, a grant's id or validity window, a
// count, the balance, the price or a socket path; logRefusal writes those
// to the host's log instead.

// callDesc names a call as the agent asked for it.
func callDesc(d *hostlog.CheckedDispatch) string {
	if d.Operation == "" {
		return "application " + d.Application
	}
	return fmt.Sprintf("operation %s of application %s", d.Operation, d.Application)
}

// noGrantRefusal is the same whether or not the operation exists.
func noGrantRefusal(d *hostlog.CheckedDispatch) *msg.Refusal {
	return &msg.Refusal{Code: msg.CodeNoGrant, Reason: "no grant covers " + callDesc(d)}
}

func notInForceReason(d *hostlog.CheckedDispatch) string {
	return "the grant that covers " + callDesc(d) + " is not in force: calls resume once the operator issues a grant in force"
}

func revokedReason(d *hostlog.CheckedDispatch) string {
	return "the grant that covers " + callDesc(d) + " is revoked: calls resume once the operator issues a new grant"
}

// dailyLimitReason names the refill: the start of the UTC day after day.
func dailyLimitReason(day int64) string {
	return "the daily limit for this call is reached: it refills at " + nextUTCDay(day) + " (the next UTC day)"
}

// logRefusal writes a refusal's full detail to the host's log.
func (s *Store) logRefusal(d *hostlog.CheckedDispatch, why string, args ...any) {
	s.log.Info("steward-operator: refused "+why,
		append([]any{"attempt", d.Attempt, "application", d.Application, "operation", d.Operation}, args...)...)
}
