package operator

import (
	"fmt"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// The host's refusals reach the agent through the controller: they name
// the limit that refused and, where it is known, when it refills, and the
// call in the agent's own terms (its operation and application). They
// never carry the controller's name, a grant's id or validity window, a
// count, the balance, the price or a socket path; logRefusal writes those
// to the host's log instead.

// callDesc names a call as the agent asked for it.
func callDesc(d *checkedDispatch) string {
	if d.operation == "" {
		return "application " + d.application
	}
	return fmt.Sprintf("operation %s of application %s", d.operation, d.application)
}

// noGrantRefusal is the same whether or not the operation exists.
func noGrantRefusal(d *checkedDispatch) *msg.Refusal {
	return &msg.Refusal{Code: msg.CodeNoGrant, Reason: "no grant covers " + callDesc(d)}
}

func notInForceReason(d *checkedDispatch) string {
	return "the grant that covers " + callDesc(d) + " is not in force: calls resume once the operator issues a grant in force"
}

func revokedReason(d *checkedDispatch) string {
	return "the grant that covers " + callDesc(d) + " is revoked: calls resume once the operator issues a new grant"
}

// dailyLimitReason names the refill: the start of the UTC day after day.
func dailyLimitReason(day int64) string {
	next := time.UnixMilli((day + 1) * 86_400_000).UTC().Format(time.RFC3339)
	return "the daily limit for this call is reached: it refills at " + next + " (the next UTC day)"
}

// logRefusal writes a refusal's full detail to the host's log.
func (s *Store) logRefusal(d *checkedDispatch, why string, args ...any) {
	s.log.Info("steward-operator: refused "+why,
		append([]any{"attempt", d.attempt, "application", d.application, "operation", d.operation}, args...)...)
}
