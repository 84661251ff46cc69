package hostlog

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// What a dispatch may hold: the host reads a controller's msg.Dispatch
// into a CheckedDispatch before anything is admitted, and what its
// reserve and ask records hold comes from it.

// CheckedDispatch is a dispatch as the host admits it: the request bytes the
// controller sent, checked to be the one canonical request of the route's
// protocol, and everything admission, consent and the receipt need,
// derived from those bytes and the route rather than taken from the frame.
type CheckedDispatch struct {
	Attempt     string
	Route       string              // the route it came on, which must still be active when it is reserved
	Application string              // the route's
	Kind        string              // msg.KindList, KindDescribe or KindInvoke, from the method and path
	Operation   string              // "" for a list
	List        oracleops.ListQuery // a list's query, which a grant's filtering pages by
	Req         oracleops.Request
	SHA         [32]byte // the request's SHA-256, as the controller journaled it
	// Deadline is when the agent stops waiting (unix ms by the controller's
	// clock; 0 from a controller before deadlines): admission refuses past
	// it and delivery never runs past it. The receipt carries it.
	Deadline int64
	// Agent is the dispatch's (msg.Dispatch.Agent; "" from a controller
	// before agents: only the grant applies); conversation and requestID
	// are an invoke's, read from its canonical body. The Agent's limits
	// count by them (the custody core's agents' limits) and the receipt carries the first two.
	Agent        string
	Conversation string
	RequestID    string
	// AgentUID is the dispatch's (msg.Dispatch.AgentUID): the calling
	// session's account, "uid:N", or "".
	AgentUID string
	// ConversationName is the dispatch's (msg.Dispatch.ConversationName),
	// checked against Conversation: the agent's own name of it.
	ConversationName string
	// Justification is the agent's short reason for a call to an
	// operation marked for approval, which its ask carries.
	Justification string
}

// CheckDispatch derives the checked dispatch from a dispatch on route rt: it parses
// the request (a list's query, a describe's operation id, an invoke's body)
// and rebuilds it with oracleops, so the bytes delivered are exactly one
// canonical request and the hash is computed here, never read from the
// frame. Fields an older controller also sent (msg.DispatchV1) are ignored.
func CheckDispatch(rt *msg.RouteRecord, d *msg.Dispatch) (*CheckedDispatch, error) {
	if err := ValidAttemptID(d.Attempt); err != nil {
		return nil, err
	}
	c := &CheckedDispatch{Attempt: d.Attempt, Route: rt.Route, Application: rt.Application, Deadline: d.Deadline}
	if d.Deadline < 0 {
		return nil, fmt.Errorf("deadline %d is before 1970", d.Deadline)
	}
	if d.Agent != "" {
		if err := ValidDispatchAgent(d.Agent); err != nil {
			return nil, err
		}
		c.Agent = d.Agent
	}
	if d.AgentUID != "" {
		if err := ValidUID("the agent's account", d.AgentUID); err != nil {
			return nil, err
		}
		c.AgentUID = d.AgentUID
	}
	if d.Justification != "" {
		if why := LineWithin("the justification", d.Justification, 0, msg.MaxJustification); why != "" {
			return nil, fmt.Errorf("%s", why)
		}
		c.Justification = d.Justification
	}
	var err error
	switch rest, ok := strings.CutPrefix(d.Path, rt.Prefix+"/"); {
	case !ok:
		return nil, fmt.Errorf("path %q is not under the route's prefix %s", Trunc(d.Path, 200), rt.Prefix)
	case d.Method == "POST" && rest == "invoke":
		c.Kind = msg.KindInvoke
		b, perr := oracleops.ParseInvokeBody(d.Body)
		if perr != nil {
			return nil, perr
		}
		c.Operation, c.Conversation, c.RequestID = b.OperationID, b.ConversationID, b.RequestID
		c.Req, err = oracleops.BuildInvoke(rt.Prefix, b)
	case d.Method == "GET" && strings.HasPrefix(rest, "operations?"):
		c.Kind = msg.KindList
		q, perr := oracleops.ParseListQuery(strings.TrimPrefix(rest, "operations?"))
		if perr != nil {
			return nil, perr
		}
		c.List = q
		c.Req, err = oracleops.BuildList(rt.Prefix, q)
	case d.Method == "GET" && strings.HasPrefix(rest, "operations/"):
		c.Kind = msg.KindDescribe
		id, perr := url.PathUnescape(strings.TrimPrefix(rest, "operations/"))
		if perr != nil {
			return nil, fmt.Errorf("describe: operation id: %w", perr)
		}
		c.Operation = id
		c.Req, err = oracleops.BuildDescribe(rt.Prefix, id)
	default:
		return nil, fmt.Errorf("%s %s is none of the protocol's requests (GET %s/operations?..., GET %s/operations/ID, POST %s/invoke)",
			Trunc(d.Method, 16), Trunc(d.Path, 200), rt.Prefix, rt.Prefix, rt.Prefix)
	}
	if err != nil {
		return nil, err
	}
	if c.Req.Method != d.Method || c.Req.Path != d.Path || string(c.Req.Body) != string(d.Body) {
		return nil, fmt.Errorf("%s: the request is not in its one canonical form", c.Kind)
	}
	if err := checkConversationName(c, d.ConversationName); err != nil {
		return nil, err
	}
	if c.Agent == "" {
		// Only an agent's conversations are counted and signed into the
		// receipt: a controller before agents keeps its receipts' bytes.
		c.Conversation = ""
	}
	c.SHA = c.Req.SHA256()
	return c, nil
}

// checkConversationName takes name, the agent's own conversationId that a
// dispatch names beside its invoke body, into c when the body's
// conversationId is its scoped form (oracleops.ScopedConversationID of the
// agent and name) or name itself (a body built before ids were scoped):
// anything else would show approvers a conversation the call is not in.
func checkConversationName(c *CheckedDispatch, name string) error {
	switch {
	case name == "":
		return nil
	case c.Kind != msg.KindInvoke:
		return fmt.Errorf("a %s names a conversation: only an invoke has one", c.Kind)
	case c.Conversation != name && c.Conversation != oracleops.ScopedConversationID(c.Agent, name):
		return fmt.Errorf("the conversation name %q is not the body's conversationId of agent %s", Trunc(name, 80), Trunc(c.Agent, 80))
	}
	c.ConversationName = name
	return nil
}

// DeadlinePassed reports whether deadline (unix ms; 0 when the controller
// sent none) has passed by the host's clock now, allowing msg.DeadlineTolerance:
// a clock exactly msg.DeadlineTolerance past the deadline is still in time.
func DeadlinePassed(deadline int64, now time.Time) bool {
	return deadline != 0 && now.UnixMilli() > deadline+msg.DeadlineTolerance.Milliseconds()
}

// Cutoff is the wall time (of the host's deadline clock now) past which nothing of
// d's delivery may run: its deadline plus msg.DeadlineTolerance, or the zero time
// when the controller sent no deadline.
func (d *CheckedDispatch) Cutoff(now time.Time) time.Time {
	if d.Deadline == 0 {
		return time.Time{}
	}
	left := time.UnixMilli(d.Deadline + msg.DeadlineTolerance.Milliseconds()).Sub(now)
	// A delivery measures its bound on this process's monotonic clock:
	// the host's wall clock (injected) gives what is left, time.Now when
	// it ends.
	return time.Now().Add(left)
}
