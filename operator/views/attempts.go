package views

import (
	"strings"
	"unicode/utf8"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// MaxResolveReason bounds the reason an operator gives for a resolution:
// one line, at most this many bytes of UTF-8. It goes into a signed
// receipt and reaches the agent.
const MaxResolveReason = 200

// The resolutions an operator may choose for an uncertain attempt.
const (
	ResolveRedeliver = "redeliver" // send the attempt's exact request again
	ResolveRelease   = "release"   // it was not performed: release, charge 0
	ResolveCharge    = "charge"    // it was performed, no answer known: settle
)

// ResolveRequest is an operator's decision on one uncertain attempt.
type ResolveRequest struct {
	Attempt string `cbor:"attempt"`
	Action  string `cbor:"action"` // ResolveRedeliver, ResolveRelease or ResolveCharge
	Reason  string `cbor:"reason"`
	// By is who resolved it, "uid:N". On the admin socket the host sets it
	// from the peer's SO_PEERCRED, whatever the request said; a command
	// that opened the store itself names its own uid.
	By string `cbor:"by"`
}

// AttemptView is one attempt as `steward-operator attempts` shows it. The
// fields after Detail are filled by inspect (and after a resolution).
type AttemptView struct {
	Attempt    string    `json:"attempt" cbor:"attempt"`
	Controller string    `json:"controller" cbor:"controller"`
	State      msg.State `json:"state" cbor:"state"`
	Reserved   uint64    `json:"reserved" cbor:"reserved"` // the reservation's charge
	Detail     string    `json:"detail,omitempty" cbor:"detail"`
	Agent      string    `json:"agent,omitempty" cbor:"agent,omitempty"` // the dispatch's agent, when it named one

	Application   string    `json:"application,omitempty" cbor:"application"`
	Operation     string    `json:"operation,omitempty" cbor:"operation"`
	Kind          string    `json:"kind,omitempty" cbor:"kind"`
	Redeliverable bool      `json:"redeliverable" cbor:"redeliverable"` // the reservation kept its request bytes
	Status        int       `json:"status,omitempty" cbor:"status"`
	BodyText      string    `json:"bodyText,omitempty" cbor:"bodyText"` // the recorded answer, when UTF-8
	ReceiptID     string    `json:"receiptId,omitempty" cbor:"receiptId"`
	Outcome       msg.State `json:"outcome,omitempty" cbor:"outcome"` // the receipt's
	Charged       *uint64   `json:"charged,omitempty" cbor:"charged"` // the receipt's charge
	Reason        string    `json:"reason,omitempty" cbor:"reason"`   // the receipt's
	ResolvedBy    string    `json:"resolvedBy,omitempty" cbor:"resolvedBy"`
}

// MaxListedAttempts bounds what one attempts list shows: the latest ones,
// so that the answer fits one reply frame of the admin socket (and a CBOR
// array's bound) however long the host's history is.
const MaxListedAttempts = 1000

// KnownHostState refuses a state the host never gives an attempt.
func KnownHostState(st msg.State) error {
	switch st {
	case msg.StateDeliveryRequested, msg.StateNotSent, msg.StateDefinite, msg.StateUncertain, msg.StateReleased, msg.StatePerformed,
		msg.StateAwaitingApproval, msg.StateRefused:
		return nil
	}
	return Refusedf("--state %q: the host's attempt states are %s, %s, %s, %s, %s, %s, %s and %s", hostlog.Trunc(string(st), 40),
		msg.StateAwaitingApproval, msg.StateDeliveryRequested, msg.StateNotSent, msg.StateDefinite, msg.StateRefused,
		msg.StateUncertain, msg.StateReleased, msg.StatePerformed)
}

// CheckResolveRequest refuses a request no resolution may take: an
// unknown action, no resolver, or a reason that is empty, longer than
// MaxResolveReason or not one line of UTF-8.
func CheckResolveRequest(req ResolveRequest) error {
	switch req.Action {
	case ResolveRedeliver, ResolveRelease, ResolveCharge:
	default:
		return Refusedf("resolve: %q is none of %s, %s or %s", hostlog.Trunc(req.Action, 40), ResolveRedeliver, ResolveRelease, ResolveCharge)
	}
	if !strings.HasPrefix(req.By, "uid:") {
		return Refusedf("resolve: the resolver %q is not an account (uid:N)", hostlog.Trunc(req.By, 40))
	}
	switch {
	case req.Reason == "":
		return Refusedf("resolve: --reason is required: say why the attempt is resolved so")
	case len(req.Reason) > MaxResolveReason:
		return Refusedf("resolve: --reason of %d bytes: the bound is %d", len(req.Reason), MaxResolveReason)
	case !utf8.ValidString(req.Reason):
		return Refusedf("resolve: --reason is not UTF-8")
	case strings.ContainsFunc(req.Reason, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return Refusedf("resolve: --reason must be one line with no control characters")
	}
	return hostlog.ValidAttemptID(req.Attempt)
}
