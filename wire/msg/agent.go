package msg

import (
	"github.com/stewardrt/steward/wire"
)

// Bounds of agent limits; package operator enforces them.
const (
	// MaxAgentOperations bounds the operation patterns of one AgentLimits.
	MaxAgentOperations = 64
	// DefaultConversationsPerDay is how many conversations of one agent
	// are counted on one UTC day when the limits do not say.
	DefaultConversationsPerDay = 100
	// MaxConversationsPerDay bounds AgentLimits.ConversationsPerDay: the
	// host keeps a count per conversation, so their number is bounded.
	MaxConversationsPerDay = 10_000
)

// DefaultAgent is the reserved agent name of a controller's default limits
// record: its limits and approval marks apply to every principal of the
// controller that has no record of its own, each principal counting its
// own day. No dispatch can name it (it is no principal's name).
const DefaultAgent = "*"

// AgentLimits is the operator's signed limits for one agent of one
// controller: which operations it may call and how much it may spend. A
// call must pass these and the grant that admits it (and the payer's own
// policy, on the controller's side). Every limit is optional: nil means
// the agent is not limited in that respect beyond the grant. A new record
// for the same controller and agent replaces the one before it (Revision
// one higher). Approvals add their field (Approval), omitted when empty,
// so older records keep their bytes.
type AgentLimits struct {
	Controller string `cbor:"controller"`
	Agent      string `cbor:"agent"`
	Revision   uint64 `cbor:"revision"` // 1 for the first record of this agent
	// Operations are "APPLICATION/OPERATION" patterns (path.Match on each
	// side of the slash); none means every operation a grant covers. A
	// listing (no operation) is allowed when any pattern names its
	// application.
	Operations             []string `cbor:"operations,omitempty"`
	CallsPerDay            *uint64  `cbor:"callsPerDay,omitempty"`            // admitted calls per UTC day
	CreditsPerDay          *uint64  `cbor:"creditsPerDay,omitempty"`          // credits charged per UTC day (reserved, until settled)
	CreditsPerConversation *uint64  `cbor:"creditsPerConversation,omitempty"` // credits per conversationId per UTC day
	// ConversationsPerDay bounds the conversations counted per UTC day
	// (0: DefaultConversationsPerDay; at most MaxConversationsPerDay): a
	// new conversationId past it is refused, so that new ids never escape
	// the daily limits.
	ConversationsPerDay uint64  `cbor:"conversationsPerDay,omitempty"`
	RatePerMinute       *uint64 `cbor:"ratePerMinute,omitempty"` // calls per minute, in memory
	Burst               uint64  `cbor:"burst,omitempty"`         // calls above the rate allowed at once (0: 1)
	IssuedAt            int64   `cbor:"issuedAt"`                // unix ms
	// Approval marks operations whose calls wait for an approval
	// (approval.go); nil: none do. Omitted when nil, so records signed
	// before it keep their bytes.
	Approval *ApprovalPolicy `cbor:"approval,omitempty"`
}

// SignAgentLimits signs l with the operator's hybrid key.
func SignAgentLimits(k *wire.HybridSigningKey, l AgentLimits) ([]byte, error) {
	return signHybrid(k, l)
}

// VerifyAgentLimits checks both signatures of an agent limits record.
func VerifyAgentLimits(signed []byte, pub *wire.HybridPublicKey) (AgentLimits, error) {
	var l AgentLimits
	err := verifyHybrid(signed, pub, &l, "agent limits")
	return l, err
}

// Allowance asks the host what Agent may still spend today under the
// operator's limits, on the route whose forward channel carries it.
type Allowance struct {
	Agent string `cbor:"agent"`
}

// AllowanceResult is the host's answer to Allowance: what is left today of
// each limit the operator set (nil: not limited), and when the day's
// counts refill (unix ms, the next UTC midnight by the host's clock).
type AllowanceResult struct {
	Agent       string   `cbor:"agent"`
	Limited     bool     `cbor:"limited"` // false: no limits record names this agent
	Operations  []string `cbor:"operations,omitempty"`
	CallsLeft   *uint64  `cbor:"callsLeft,omitempty"`
	CreditsLeft *uint64  `cbor:"creditsLeft,omitempty"`
	RefillsAt   int64    `cbor:"refillsAt"`
}
