package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/wire/msg"
)

// The advisor socket's two tools (DESIGN.md section 7). An advisor reads
// the asks it may answer and answers one; it calls no application and
// spends nothing, so the oracle tools are not there.
const (
	ToolAsks   = "steward_asks"
	ToolAdvise = "steward_advise"
)

// advisorInstructions is what the advisor server tells a client at
// initialize: what an advisor does, and that WAIT leaves the ask to a human.
const advisorInstructions = `You advise on other agents' calls that the operator marked as needing approval: steward_asks lists the asks you may answer, and steward_advise answers one with approve, deny or wait and one sentence saying why.
WAIT changes nothing and leaves the ask for a human to answer; a refused answer (accepted false, e.g. the operator's bound on agent answers held) is not an error, and the ask keeps waiting.`

// AdvisorAsk is an ask as an advisor is shown it: what was asked, by whom,
// for how much, and until when. Who answered an answered ask is not shown
// (an advisor is told only that it was answered).
type AdvisorAsk struct {
	ID           string `json:"id"`
	Agent        string `json:"agent"`        // the asking agent
	Conversation string `json:"conversation"` // its conversation ("": none)
	Application  string `json:"application"`
	Operation    string `json:"operation"`
	// Arguments are the call's arguments, as the request carries them.
	Arguments     json.RawMessage `json:"arguments"`
	Price         uint64          `json:"price"`
	Justification string          `json:"justification,omitempty"`
	RaisedAt      string          `json:"raisedAt"`  // RFC 3339, UTC
	ExpiresAt     string          `json:"expiresAt"` // RFC 3339, UTC
	OnTimeout     string          `json:"onTimeout"` // the verdict the ask expires to
	State         string          `json:"state"`     // pending, approved, denied, expired
}

// AsksAnswer is steward_asks' structured content. Reason says why no
// asks could be listed (isError true).
type AsksAnswer struct {
	Asks []AdvisorAsk `json:"asks"`
	// Next, when set, is the after of the next page: the host answers
	// pages of at most msg.AsksPageBytes, so a list of big asks never
	// passes a frame.
	Next   string `json:"next,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AdviseAnswer is steward_advise's structured content: whether the answer
// was taken, why not, and the ask as it stands after it.
type AdviseAnswer struct {
	Accepted bool        `json:"accepted"`
	Reason   string      `json:"reason,omitempty"`
	Ask      *AdvisorAsk `json:"ask,omitempty"`
}

// AdviseArgs are steward_advise's arguments.
type AdviseArgs struct {
	Ask      string `json:"ask"`
	Verdict  string `json:"verdict"`
	Sentence string `json:"sentence"`
}

// askIDPattern is the shape of an ask's id, as the host makes them.
const askIDPattern = "^ask-[0-9a-f]{12}$"

var askIDRe = regexp.MustCompile(askIDPattern)

// newAdvisorServer builds the advisor socket's MCP server: exactly the two
// tools, each answer validating against its output schema, and the
// server's other methods as mcp.sock's (onlyDeclared).
func (c *Controller) newAdvisorServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-advisor", Version: Version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Instructions: advisorInstructions,
		Logger:       c.log,
	})
	s.AddReceivingMiddleware(onlyDeclared)
	s.AddTool(asksTool(), c.asksHandler)
	s.AddTool(adviseTool(), c.adviseHandler)
	return s
}

// asksHandler answers steward_asks: the host's list for the session's
// advisor.
func (c *Controller) asksHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	none := func(reason string) (*mcp.CallToolResult, error) {
		return structured(AsksAnswer{Asks: []AdvisorAsk{}, Reason: reason}, "", true)
	}
	advisor, ok := ctx.Value(advisorKey{}).(string)
	if !ok {
		return none("the session names no advisor; nothing was sent")
	}
	var args struct {
		After string `json:"after,omitempty"`
	}
	if _, err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return none(err.Error())
	}
	after, err := pageCursor(args.After)
	if err != nil {
		return none(err.Error())
	}
	r, refusal, err := c.hostAsksPage(ctx, advisor, after)
	switch {
	case err != nil:
		return none("the host cannot be reached now: the asks are unknown until it can be")
	case refusal != nil:
		return none(refusal.Reason)
	}
	out := AsksAnswer{Asks: make([]AdvisorAsk, 0, len(r.Asks))}
	if r.Next != 0 {
		out.Next = strconv.FormatUint(r.Next, 10)
	}
	for _, v := range r.Asks {
		out.Asks = append(out.Asks, c.advisorAsk(v))
	}
	return structured(out, "", false)
}

// adviseHandler answers steward_advise: the arguments are checked before
// anything is sent, then the host takes the verdict or says why not.
func (c *Controller) adviseHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fail := func(reason string) (*mcp.CallToolResult, error) {
		return structured(AdviseAnswer{Reason: reason}, "", true)
	}
	advisor, ok := ctx.Value(advisorKey{}).(string)
	if !ok {
		return fail("the session names no advisor; nothing was sent")
	}
	a, err := adviseArgs(req.Params.Arguments)
	if err != nil {
		return fail(err.Error())
	}
	r, refusal, err := c.hostAdvise(ctx, msg.Advise{Advisor: advisor, Ask: a.Ask, Verdict: msg.Verdict(a.Verdict), Sentence: a.Sentence, AdvisorUID: peerUIDOf(ctx)})
	if err != nil {
		return fail("the host cannot be reached now: the answer was not taken; answer again when it can be")
	}
	if refusal == nil && r.Refused != nil {
		refusal = r.Refused
	}
	var ask *AdvisorAsk
	if r != nil && r.Ask.ID != "" {
		a := c.advisorAsk(r.Ask)
		ask = &a
	}
	switch {
	case refusal == nil:
		return structured(AdviseAnswer{Accepted: true, Ask: ask}, "", false)
	case refusal.Code == msg.CodeApprovals:
		// The operator's rules holding (the bound spent, the ask already
		// answered, not an advisor of its agent, its own ask): not an
		// error, and the ask is unchanged.
		return structured(AdviseAnswer{Reason: refusal.Reason, Ask: ask}, "", false)
	default:
		// The host's failure (a journal), or a check of its own.
		return structured(AdviseAnswer{Reason: refusal.Reason, Ask: ask}, "", true)
	}
}

// adviseArgs decodes and checks steward_advise's arguments, in steward's
// words (argwords.go), before anything is sent to the host.
func adviseArgs(raw []byte) (AdviseArgs, error) {
	var a AdviseArgs
	if _, err := decodeArgs(raw, &a); err != nil {
		return a, err
	}
	switch {
	case a.Ask == "":
		return a, argErr("ask: missing: the id of an ask steward_asks lists")
	case !askIDRe.MatchString(a.Ask):
		return a, argErr("ask: %s is not an ask's id (\"ask-\" and 12 of 0-9 a-f, as steward_asks lists them)", shownArg(a.Ask))
	}
	switch msg.Verdict(a.Verdict) {
	case msg.VerdictApprove, msg.VerdictDeny, msg.VerdictWait:
	case "":
		return a, argErr(`verdict: missing: "approve", "deny" or "wait"`)
	default:
		return a, argErr(`verdict: must be "approve", "deny" or "wait", not %s`, shownArg(a.Verdict))
	}
	return a, sentenceWords(a.Sentence)
}

// sentenceWords checks the advisor's sentence: 1 to msg.MaxAdviceSentence
// bytes of UTF-8, one line.
func sentenceWords(s string) error {
	switch {
	case s == "":
		return argErr("sentence: missing: one line of at most %d bytes saying why", msg.MaxAdviceSentence)
	case len(s) > msg.MaxAdviceSentence:
		return argErr("sentence: %d bytes is past the bound of %d bytes", len(s), msg.MaxAdviceSentence)
	case !utf8.ValidString(s):
		return argErr("sentence: must be UTF-8 text")
	}
	if i := msg.LineBreakAt(s); i >= 0 {
		return argErr("sentence: must be one line, but it has a line break at byte %d", i)
	}
	return nil
}

// maxArgShown bounds what a refusal repeats of a string the advisor wrote.
const maxArgShown = 24

// shownArg quotes s for a refusal, cut to maxArgShown bytes.
func shownArg(s string) string {
	if len(s) > maxArgShown {
		return fmt.Sprintf("%q...", strings.ToValidUTF8(s[:maxArgShown], ""))
	}
	return fmt.Sprintf("%q", s)
}

// advisorAsk is the host's view of an ask as an advisor is shown it.
// Arguments the host sent that are not JSON (it makes them canonical JSON)
// are shown as null and logged, never passed on as text.
func (c *Controller) advisorAsk(v msg.AskView) AdvisorAsk {
	args := json.RawMessage("null")
	if json.Valid(v.Arguments) {
		args = json.RawMessage(v.Arguments)
	} else {
		c.log.Error("the host's ask carries arguments that are not JSON", "ask", v.ID)
	}
	return AdvisorAsk{
		ID: v.ID, Agent: v.Agent, Conversation: cmp.Or(v.ConversationName, v.Conversation), Application: v.Application, Operation: v.Operation,
		Arguments: args, Price: v.Price, Justification: v.Justification,
		RaisedAt: rfc3339(v.RaisedAt), ExpiresAt: rfc3339(v.ExpiresAt),
		OnTimeout: string(v.OnTimeout), State: string(v.State),
	}
}

// pageCursor reads steward_asks' after: "" is the first page.
func pageCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, argErr("after %q is no page's next: give the next of the answer before", s)
	}
	return n, nil
}

// rfc3339 is a unix millisecond time as RFC 3339 in UTC.
func rfc3339(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// advisorAnnotations: steward_asks only reads; steward_advise decides an
// ask (a deny refuses another agent's call, an approve lets it go on), so
// it is not read-only and may be destructive for that call, and a second
// answer to the same ask is refused, so it is not idempotent either. Both
// worlds are the controller and its host, a closed set.
var (
	asksAnnotations = &mcp.ToolAnnotations{
		Title:        "Asks waiting for an answer",
		ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false),
	}
	adviseAnnotations = &mcp.ToolAnnotations{
		Title:          "Answer an ask",
		ReadOnlyHint:   false,
		IdempotentHint: false, DestructiveHint: new(true), OpenWorldHint: new(false),
	}
)

func asksTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ToolAsks,
		Description: "List the asks you may answer, oldest first: calls of other agents waiting for an approval, each with the asking agent, " +
			"its conversation, the application and operation, the call's arguments and price, the agent's justification, and when it was raised " +
			"and expires. One page at a time: when the answer has next, call again with after set to it for the asks that follow.",
		InputSchema: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
			"after": map[string]any{"type": "string", "pattern": "^[0-9]{1,20}$", "description": "the next of the page before (omitted: the first page)"},
		}},
		OutputSchema: asksOutputSchema(),
		Annotations:  asksAnnotations,
	}
}

func adviseTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ToolAdvise,
		Description: "Answer one ask steward_asks lists: approve lets the call go on, deny refuses it (nothing is charged), " +
			"wait changes nothing and leaves it for a human. accepted false (not an error) says why the answer was not taken, " +
			"e.g. the operator's bound on agent answers for the conversation held; the ask then keeps waiting.",
		InputSchema: map[string]any{
			"type": "object", "additionalProperties": false,
			"required": []string{"ask", "verdict", "sentence"},
			"properties": map[string]any{
				"ask": map[string]any{"type": "string", "pattern": askIDPattern,
					"description": `the ask's id, as steward_asks lists it ("ask-" and 12 of 0-9 a-f)`},
				"verdict": map[string]any{"type": "string", "enum": []string{string(msg.VerdictApprove), string(msg.VerdictDeny), string(msg.VerdictWait)},
					"description": "approve (the call goes on), deny (it is refused) or wait (nothing changes; a human answers)"},
				"sentence": map[string]any{"type": "string", "minLength": 1, "maxLength": msg.MaxAdviceSentence, "pattern": "^[^\\r\\n]+$",
					"description": fmt.Sprintf("one line of at most %d bytes saying why, recorded with the answer", msg.MaxAdviceSentence)},
			},
		},
		OutputSchema: adviseOutputSchema(),
		Annotations:  adviseAnnotations,
	}
}

// advisorAskSchema is AdvisorAsk's (output schemas: outputschema.go's
// rules, additionalProperties open).
func advisorAskSchema() map[string]any {
	return map[string]any{"type": "object",
		"required":    []string{"id", "agent", "conversation", "application", "operation", "arguments", "price", "raisedAt", "expiresAt", "onTimeout", "state"},
		"description": "an ask: a call waiting for an approval",
		"properties": map[string]any{
			"id":            schemaText("the ask's id: steward_advise takes it"),
			"agent":         schemaText("the agent whose call it is"),
			"conversation":  schemaText(`the conversation the call belongs to ("" for none); the operator's bound on agent answers counts per conversation`),
			"application":   schemaText("the application called"),
			"operation":     schemaText("the operation called"),
			"arguments":     map[string]any{"description": "the call's arguments, as JSON"},
			"price":         schemaCount("what the call costs, in credits, if it goes on"),
			"justification": schemaText("what the agent said of why it makes the call, if it said"),
			"raisedAt":      schemaText("when the ask was raised (RFC 3339, UTC)"),
			"expiresAt":     schemaText("when an unanswered ask expires to its onTimeout verdict (RFC 3339, UTC)"),
			"onTimeout":     schemaText("what the ask expires to unanswered: approve or deny"),
			"state":         schemaText("pending, approved, denied or expired"),
		}}
}

func asksOutputSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"asks"}, "properties": map[string]any{
		"asks":   map[string]any{"type": "array", "items": advisorAskSchema(), "description": "the asks you may answer, oldest first"},
		"next":   schemaText("more asks follow: call again with after set to this"),
		"reason": schemaText("why no asks could be listed (isError true)"),
	}}
}

func adviseOutputSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"accepted"}, "properties": map[string]any{
		"accepted": map[string]any{"type": "boolean", "description": "true: the answer was taken (a wait changes nothing); false: see reason"},
		"reason":   schemaText("why the answer was not taken, in one line"),
		"ask":      withDescription(advisorAskSchema(), "the ask as it stands after the answer"),
	}}
}
