package operator

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// checkedDispatch is a dispatch as the host admits it: the request bytes the
// controller sent, checked to be the one canonical request of the route's
// protocol, and everything admission, consent and the receipt need,
// derived from those bytes and the route rather than taken from the frame.
type checkedDispatch struct {
	attempt     string
	route       string              // the route it came on, which must still be active when it is reserved
	application string              // the route's
	kind        string              // msg.KindList, KindDescribe or KindInvoke, from the method and path
	operation   string              // "" for a list
	list        oracleops.ListQuery // a list's query, which a grant's filtering pages by
	req         oracleops.Request
	sha         [32]byte // the request's SHA-256, as the controller journaled it
	// deadline is when the agent stops waiting (unix ms by the controller's
	// clock; 0 from a controller before deadlines): admission refuses past
	// it and delivery never runs past it. The receipt carries it.
	deadline int64
	// agent is the dispatch's (msg.Dispatch.Agent; "" from a controller
	// before agents: only the grant applies); conversation and requestID
	// are an invoke's, read from its canonical body. The agent's limits
	// count by them (agentlimits.go) and the receipt carries the first two.
	agent        string
	conversation string
	requestID    string
	// justification is the agent's short reason for a call to an
	// operation marked for approval, which its ask carries.
	justification string
}

// checkDispatch derives the checked dispatch from a dispatch on route rt: it parses
// the request (a list's query, a describe's operation id, an invoke's body)
// and rebuilds it with oracleops, so the bytes delivered are exactly one
// canonical request and the hash is computed here, never read from the
// frame. Fields an older controller also sent (msg.DispatchV1) are ignored.
func checkDispatch(rt *msg.RouteRecord, d *msg.Dispatch) (*checkedDispatch, error) {
	if err := hostlog.ValidAttemptID(d.Attempt); err != nil {
		return nil, err
	}
	c := &checkedDispatch{attempt: d.Attempt, route: rt.Route, application: rt.Application, deadline: d.Deadline}
	if d.Deadline < 0 {
		return nil, fmt.Errorf("deadline %d is before 1970", d.Deadline)
	}
	if d.Agent != "" {
		if err := hostlog.ValidDispatchAgent(d.Agent); err != nil {
			return nil, err
		}
		c.agent = d.Agent
	}
	if d.Justification != "" {
		if why := hostlog.LineWithin("the justification", d.Justification, 0, msg.MaxJustification); why != "" {
			return nil, fmt.Errorf("%s", why)
		}
		c.justification = d.Justification
	}
	var err error
	switch rest, ok := strings.CutPrefix(d.Path, rt.Prefix+"/"); {
	case !ok:
		return nil, fmt.Errorf("path %q is not under the route's prefix %s", hostlog.Trunc(d.Path, 200), rt.Prefix)
	case d.Method == "POST" && rest == "invoke":
		c.kind = msg.KindInvoke
		b, perr := oracleops.ParseInvokeBody(d.Body)
		if perr != nil {
			return nil, perr
		}
		c.operation, c.conversation, c.requestID = b.OperationID, b.ConversationID, b.RequestID
		c.req, err = oracleops.BuildInvoke(rt.Prefix, b)
	case d.Method == "GET" && strings.HasPrefix(rest, "operations?"):
		c.kind = msg.KindList
		q, perr := oracleops.ParseListQuery(strings.TrimPrefix(rest, "operations?"))
		if perr != nil {
			return nil, perr
		}
		c.list = q
		c.req, err = oracleops.BuildList(rt.Prefix, q)
	case d.Method == "GET" && strings.HasPrefix(rest, "operations/"):
		c.kind = msg.KindDescribe
		id, perr := url.PathUnescape(strings.TrimPrefix(rest, "operations/"))
		if perr != nil {
			return nil, fmt.Errorf("describe: operation id: %w", perr)
		}
		c.operation = id
		c.req, err = oracleops.BuildDescribe(rt.Prefix, id)
	default:
		return nil, fmt.Errorf("%s %s is none of the protocol's requests (GET %s/operations?..., GET %s/operations/ID, POST %s/invoke)",
			hostlog.Trunc(d.Method, 16), hostlog.Trunc(d.Path, 200), rt.Prefix, rt.Prefix, rt.Prefix)
	}
	if err != nil {
		return nil, err
	}
	if c.req.Method != d.Method || c.req.Path != d.Path || string(c.req.Body) != string(d.Body) {
		return nil, fmt.Errorf("%s: the request is not in its one canonical form", c.kind)
	}
	if c.agent == "" {
		// Only an agent's conversations are counted and signed into the
		// receipt: a controller before agents keeps its receipts' bytes.
		c.conversation = ""
	}
	c.sha = c.req.SHA256()
	return c, nil
}

// checkDeadline refuses a dispatch of controller ctrl whose deadline has
// passed by the host's wall clock (deadlineClock), before anything is
// admitted or reserved. A dispatch without a deadline comes from a
// controller before deadlines: it is delivered under the route's timeouts
// alone, and the host says so in its log once per controller.
func (s *Store) checkDeadline(ctrl string, c *checkedDispatch) *msg.Refusal {
	if c.deadline == 0 {
		s.warnOnce("no-deadline/"+ctrl, "steward-operator: controller sends dispatches without a deadline (a controller before deadlines); they are delivered under the route's timeouts alone",
			"controller", ctrl, "attempt", c.attempt)
		return nil
	}
	return s.deadlineRefusal(c, "before admission")
}

// warnOnce logs a warning the first time key is seen by this store.
func (s *Store) warnOnce(key, message string, args ...any) {
	if _, seen := s.warned.LoadOrStore(key, true); !seen {
		s.log.Warn(message, args...)
	}
}
