package msg

import (
	"path"
	"strings"
	"time"

	"github.com/stewardrt/steward/wire"
)

// Approvals (DESIGN.md section 5, "Approvals"): the operator's signed
// limits for an agent (AgentLimits.Approval) may mark operations as needing
// a human's or a bounded advisor agent's approval. A call to one is
// admitted as usual and then becomes an ask, journaled by the host before
// anything waits on it; nothing is reserved or delivered until it is
// approved.
//
// The frames:
//
//	forward  dispatch -> dispatch-result  outcome awaiting-approval, Ask set
//	forward  collect  -> dispatch-result  the same attempt: pending again, or its end
//	reverse  verdict  -> verdict-ack      host -> controller: an ask was decided
//	control  asks     -> asks-result      the asks an advisor may answer
//	control  advise   -> advise-result    an advisor's verdict
const (
	TypeCollect      = "collect"
	TypeVerdict      = "verdict"
	TypeVerdictAck   = "verdict-ack"
	TypeAsks         = "asks"
	TypeAsksResult   = "asks-result"
	TypeAdvise       = "advise"
	TypeAdviseResult = "advise-result"
)

// StateAwaitingApproval: the host journaled an ask for the attempt and has
// reserved and delivered nothing; the attempt waits for its verdict. It is
// not an end: a collect of the same attempt goes on from it.
const StateAwaitingApproval State = "awaiting-approval"

// CodeDenied: the ask of the call was denied (by a human, an advisor, or
// its expiry to a deny verdict); nothing was reserved, sent or charged.
const CodeDenied = "denied"

// CodeApprovals: an answer to an ask was refused (already answered, the
// advisor's bound spent, not an advisor, its own ask); the ask is unchanged.
const CodeApprovals = "approvals"

// Bounds of approvals; package operator enforces them, and the controller
// those of what an agent writes (the justification, the advisor's sentence).
const (
	// DefaultApprovalPark is how long a call to a marked operation waits
	// inside the agent's MCP call for its verdict when the policy does not
	// say; MaxApprovalPark bounds it, so that the park and a call's 5
	// minute deadline counted after it stay inside the proxy's 11 minute
	// answer bound (controller/mcpproxy.ProxyAnswerBound).
	DefaultApprovalPark = 30 * time.Second
	MaxApprovalPark     = 5 * time.Minute
	// DefaultApprovalExpiry is how long an unanswered ask stays pending
	// before it expires to the policy's on-timeout verdict;
	// MaxApprovalExpiry bounds it.
	DefaultApprovalExpiry = 24 * time.Hour
	MaxApprovalExpiry     = 30 * 24 * time.Hour
	// MaxApprovalOperations bounds ApprovalPolicy.Operations.
	MaxApprovalOperations = 64
	// MaxAdvisors bounds ApprovalPolicy.Advisors.
	MaxAdvisors = 16
	// DefaultAgentAnswers is how many asks of one asking agent and
	// conversation advisors may answer (approve or deny) when the policy
	// does not say; MaxAgentAnswers bounds it. 0 means none, never
	// unlimited.
	DefaultAgentAnswers = 3
	MaxAgentAnswers     = 1000
	// DefaultAgentAnswersPerDay is how many asks of one asking agent
	// advisors may decide (approve or deny) on one UTC day, whatever
	// conversations the asks name, when the policy does not say;
	// MaxAgentAnswersPerDay bounds it. The asking agent names its
	// conversations, so the per-conversation bound alone is one it can
	// choose its way past: this one it cannot. 0 means none.
	DefaultAgentAnswersPerDay = 10
	MaxAgentAnswersPerDay     = 10000
	// MaxJustification bounds the justification an agent may give a call
	// to a marked operation (bytes of UTF-8, one line).
	MaxJustification = 512
	// MaxAdviceSentence bounds an advisor's one sentence (bytes, one line).
	MaxAdviceSentence = 280
	// MaxApprovalNote bounds a human's --note (bytes, one line).
	MaxApprovalNote = 512
	// MaxAsksListed bounds the asks one list answers (the oldest first).
	MaxAsksListed = 100
	// AsksPageBytes bounds the encoded asks (or events) of one page of a
	// list, an advisor's list or an event batch: a page ends before the
	// ask that would pass it, and says where the next begins, so a reply
	// stays far inside wire.MaxReplyFrame (a quarter of it) whatever the
	// asks hold. One ask alone always fits a page: its body is at most
	// the 64 KiB of an invocation body, and its other fields are bounded.
	AsksPageBytes = wire.MaxReplyFrame / 4
)

// LineBreakAt is the byte offset of the first line break in s (CR, LF,
// U+2028 or U+2029), or -1: a justification, an advisor's sentence and an
// approver's note must each be one line, and this is the one rule of what
// breaks one, which the controller and the host both apply.
func LineBreakAt(s string) int {
	return strings.IndexFunc(s, func(r rune) bool { return r == '\r' || r == '\n' || r == '\u2028' || r == '\u2029' })
}

// Verdict is an answer to an ask. Only approve and deny decide one; wait,
// an advisor's, changes nothing and is never journaled.
type Verdict string

// Verdicts.
const (
	VerdictApprove Verdict = "approve"
	VerdictDeny    Verdict = "deny"
	VerdictWait    Verdict = "wait"
)

// AskState is where an ask stands. An expired ask's Verdict is the
// policy's on-timeout verdict.
type AskState string

// Ask states.
const (
	AskPending  AskState = "pending"
	AskApproved AskState = "approved"
	AskDenied   AskState = "denied"
	AskExpired  AskState = "expired"
	// AskLapsed: approved, but not collected within its collect window
	// (AskView.CollectBy): it went to its on-timeout verdict, deny, and
	// its call is refused as denied.
	AskLapsed AskState = "lapsed"
)

// ApprovalPolicy is the approvals part of an agent's limits: which of its
// calls wait for an approval, for how long, and who other than a human may
// answer them.
type ApprovalPolicy struct {
	// Operations are "APPLICATION/OPERATION" patterns (path.Match on each
	// side, as AgentLimits.Operations); at least one. A listing or a
	// descriptor is never marked: only an invocation is.
	Operations []string `cbor:"operations" json:"operations"`
	ParkMs     int64    `cbor:"parkMs,omitempty" json:"parkMs,omitempty"`       // 0: DefaultApprovalPark
	ExpiryMs   int64    `cbor:"expiryMs,omitempty" json:"expiryMs,omitempty"`   // 0: DefaultApprovalExpiry
	OnTimeout  Verdict  `cbor:"onTimeout,omitempty" json:"onTimeout,omitempty"` // "": VerdictDeny
	// Advisors are the configured agents (by name, which the controller
	// maps from SO_PEERCRED) that may answer this agent's asks. None: only
	// humans answer.
	Advisors []string `cbor:"advisors,omitempty" json:"advisors,omitempty"`
	// AgentAnswers bounds the asks of one conversation of this agent that
	// advisors may decide (nil: DefaultAgentAnswers; 0: none).
	AgentAnswers *uint64 `cbor:"agentAnswers,omitempty" json:"agentAnswers,omitempty"`
	// AgentAnswersPerDay bounds the asks of this agent that advisors may
	// decide on one UTC day, over all its conversations (nil:
	// DefaultAgentAnswersPerDay; 0: none). Both bounds hold.
	AgentAnswersPerDay *uint64 `cbor:"agentAnswersPerDay,omitempty" json:"agentAnswersPerDay,omitempty"`
}

// Marks reports whether an invocation of operation op of application app
// needs approval under p.
func (p *ApprovalPolicy) Marks(app, op string) bool {
	if p == nil || op == "" {
		return false
	}
	for _, pat := range p.Operations {
		a, o, ok := strings.Cut(pat, "/")
		if !ok {
			continue
		}
		if m, err := path.Match(a, app); err != nil || !m {
			continue
		}
		if m, err := path.Match(o, op); err == nil && m {
			return true
		}
	}
	return false
}

// Park is how long a call waits for its verdict inside one MCP call.
func (p *ApprovalPolicy) Park() time.Duration {
	if p.ParkMs == 0 {
		return DefaultApprovalPark
	}
	return time.Duration(p.ParkMs) * time.Millisecond
}

// Expiry is how long an unanswered ask stays pending.
func (p *ApprovalPolicy) Expiry() time.Duration {
	if p.ExpiryMs == 0 {
		return DefaultApprovalExpiry
	}
	return time.Duration(p.ExpiryMs) * time.Millisecond
}

// TimeoutVerdict is what an ask expires to.
func (p *ApprovalPolicy) TimeoutVerdict() Verdict {
	if p.OnTimeout == "" {
		return VerdictDeny
	}
	return p.OnTimeout
}

// AgentAnswerBound is how many asks of one conversation advisors may
// decide; 0 when none may (no advisors named, or AgentAnswers 0).
func (p *ApprovalPolicy) AgentAnswerBound() uint64 {
	switch {
	case p == nil || len(p.Advisors) == 0:
		return 0
	case p.AgentAnswers == nil:
		return DefaultAgentAnswers
	}
	return *p.AgentAnswers
}

// AgentAnswerDayBound is how many asks of this agent advisors may decide
// on one UTC day; 0 when none may (no advisors named, or
// AgentAnswersPerDay 0).
func (p *ApprovalPolicy) AgentAnswerDayBound() uint64 {
	switch {
	case p == nil || len(p.Advisors) == 0:
		return 0
	case p.AgentAnswersPerDay == nil:
		return DefaultAgentAnswersPerDay
	}
	return *p.AgentAnswersPerDay
}

// MayAdvise reports whether the agent named advisor may answer asks under p.
func (p *ApprovalPolicy) MayAdvise(advisor string) bool {
	if p == nil {
		return false
	}
	for _, a := range p.Advisors {
		if a == advisor {
			return true
		}
	}
	return false
}

// AskTicket is what a dispatch result awaiting approval (and a collect
// still pending) tells the controller: the ask, and until when the call
// may park inside the agent's MCP call (unix ms by the host's clock).
type AskTicket struct {
	ID        string  `cbor:"id"`
	ParkUntil int64   `cbor:"parkUntil"`
	ExpiresAt int64   `cbor:"expiresAt"`
	OnTimeout Verdict `cbor:"onTimeout"`
}

// Collect asks the host, on the route's forward channel, what became of
// the ask of an attempt that awaited approval, and goes on with it when it
// was approved: admission again, then reserve, consent and delivery under
// Deadline (unix ms by the controller's clock, counted from when the
// controller learned of the approval or the agent called again). Answered
// by a DispatchResult: awaiting-approval again (Ask set) or the attempt's
// end.
type Collect struct {
	Attempt  string `cbor:"attempt"`
	Deadline int64  `cbor:"deadline"`
}

// VerdictPush tells the controller, on the reverse channel, that the ask
// of one of its attempts was decided, so that a parked call collects at
// once (no polling). It carries no authority: the controller collects, and
// the host's answer to the collect is what counts. Answered by
// TypeVerdictAck with an empty body.
type VerdictPush struct {
	Attempt string   `cbor:"attempt"`
	Ask     string   `cbor:"ask"`
	State   AskState `cbor:"state"`
}

// Asks asks the host, on the control channel, for the pending asks the
// advisor may answer (the controller names the advisor from SO_PEERCRED,
// as it names a dispatch's agent). Answered by AsksResult, or refused
// (code CodeApprovals) when no limits record names the agent an advisor.
type Asks struct {
	Advisor string `cbor:"advisor"`
	// After is the cursor of the page asked for: the Next of the page
	// before (0: the first page).
	After uint64 `cbor:"after,omitempty"`
}

// AsksResult lists the asks, oldest first: one page, at most
// MaxAsksListed asks and AsksPageBytes of them encoded. Next, when not 0,
// is the After of the page that follows.
type AsksResult struct {
	Asks []AskView `cbor:"asks"`
	Next uint64    `cbor:"next,omitempty"`
}

// AskView is an ask as the host shows it: to an advisor, to the approvals
// commands, in `approvals watch`. Arguments is the canonical JSON of the
// call's arguments, as the request bytes carry them.
type AskView struct {
	ID           string `cbor:"id" json:"id"`
	Attempt      string `cbor:"attempt" json:"attempt"`
	Controller   string `cbor:"controller" json:"controller"`
	Agent        string `cbor:"agent" json:"agent"`
	Conversation string `cbor:"conversation,omitempty" json:"conversation,omitempty"`
	// ConversationName is the conversation as the asking agent named it
	// (Conversation is its scoped form, as the application and the
	// receipts see it); omitted when the dispatch did not say.
	ConversationName string   `cbor:"conversationName,omitempty" json:"conversationName,omitempty"`
	Application      string   `cbor:"application" json:"application"`
	Operation        string   `cbor:"operation" json:"operation"`
	RequestSHA256    string   `cbor:"requestSha256" json:"requestSha256"` // hex
	Arguments        []byte   `cbor:"arguments" json:"-"`                 // canonical JSON
	Price            uint64   `cbor:"price" json:"price"`
	Justification    string   `cbor:"justification,omitempty" json:"justification,omitempty"`
	RaisedAt         int64    `cbor:"raisedAt" json:"raisedAt"`
	ExpiresAt        int64    `cbor:"expiresAt" json:"expiresAt"`
	OnTimeout        Verdict  `cbor:"onTimeout" json:"onTimeout"`
	State            AskState `cbor:"state" json:"state"`
	AnsweredBy       string   `cbor:"answeredBy,omitempty" json:"answeredBy,omitempty"`
	AnsweredAt       int64    `cbor:"answeredAt,omitempty" json:"answeredAt,omitempty"`
	Note             string   `cbor:"note,omitempty" json:"note,omitempty"`
	// CollectBy is when an approval's collect window ends (unix ms): past
	// it, uncollected, the ask lapses to deny. Omitted when it has none.
	CollectBy int64 `cbor:"collectBy,omitempty" json:"collectBy,omitempty"`
}

// Advise is an advisor's verdict on one ask, on the control channel.
// Sentence is its one short reason (at most MaxAdviceSentence bytes, one
// line), journaled with the answer.
type Advise struct {
	Advisor  string  `cbor:"advisor"`
	Ask      string  `cbor:"ask"`
	Verdict  Verdict `cbor:"verdict"`
	Sentence string  `cbor:"sentence"`
	// AdvisorUID is the advisor session's account, "uid:N" from
	// SO_PEERCRED (the controller's word): the host refuses it on an ask
	// the same account raised, as it refuses the advisor's own name.
	// Omitted by controllers before it.
	AdvisorUID string `cbor:"advisorUid,omitempty"`
}

// AdviseResult is the host's answer to Advise: the ask as it stands after
// it. Refused is set when the answer was not taken (the bound held, the
// ask was already answered, ...): the ask keeps waiting, and the reason is
// the one line the advisor is told. A wait is taken and changes nothing.
type AdviseResult struct {
	Ask     AskView  `cbor:"ask"`
	Refused *Refusal `cbor:"refused,omitempty"`
}
