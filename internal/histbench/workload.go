package histbench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/wire/msg"
)

// The tools and the one application of a dev stack.
const (
	toolCall     = foreground.ToolCall
	toolDiscover = foreground.ToolDiscover
	application  = "appliance"
	// markedOp is the operation the generator marks for approval for the
	// MCP agent: its calls raise asks, which the responder answers by the
	// call's justification (responder.go).
	markedOp = "time.duration"
)

// The justifications of marked calls: what the responder does with them.
const (
	justApprove = "approve"
	justDeny    = "deny"
	justExpire  = "expire" // left unanswered, to expire on the next day
)

// call is one tool call of the workload.
type call struct {
	kind string // the kinds of outcomes counts it under
	tool string
	args map[string]any
	fg   bool // on the foreground socket (principal foreground), else MCP
	ack  bool // a foreground call whose result is then acknowledged
}

// bulk is the i-th call of the bulk traffic (i from 1), the same for
// every generation: per 1,000 calls, 10 the appliance refuses (422), 5
// marked for approval (4 approved, 1 denied), 2 discoveries, 4 replays of
// a call 999 before, 1 on the foreground socket (half of them then
// acknowledged), and the rest calc.evaluate, units.convert and
// text.sha256 in turn. Call 1 is the oldest, made alone: its requestId is
// the one the measurement asks again.
func bulk(i int) call {
	switch {
	case i == 1:
		return invoke("call", i, "calc.evaluate", map[string]any{"expression": "3 * 687 / 365.25"})
	case i%1000 == 500:
		c := invoke("foreground", i, "text.sha256", map[string]any{"text": "foreground " + strconv.Itoa(i)})
		c.fg, c.ack = true, i%2000 == 500
		return c
	case i%800 == 100:
		return marked(i, justDeny)
	case i%200 == 100:
		return marked(i, justApprove)
	case i%100 == 37:
		return invoke("app-refusal", i, "calc.evaluate", map[string]any{"expression": strconv.Itoa(i) + " / 0"})
	case i%1000 == 250:
		return call{kind: "discover", tool: toolDiscover, args: map[string]any{"application": application, "query": "convert"}}
	case i%1000 == 750:
		return call{kind: "discover", tool: toolDiscover, args: map[string]any{"application": application, "operationId": "units.convert"}}
	case i%250 == 125 && i > 1000:
		c := bulk(i - 999) // always an ordinary call: see the cases above
		c.kind = "replay"
		return c
	}
	switch i % 3 {
	case 0:
		return invoke("call", i, "calc.evaluate", map[string]any{"expression": strconv.Itoa(i) + " * 687 / 365.25"})
	case 1:
		return invoke("call", i, "units.convert", map[string]any{"value": strconv.Itoa(i), "from": "km", "to": "mi"})
	}
	return invoke("call", i, "text.sha256", map[string]any{"text": "call " + strconv.Itoa(i)})
}

// invoke is an oracle_call of operation op with requestId h-I in one of
// 64 conversations.
func invoke(kind string, i int, op string, args map[string]any) call {
	return call{kind: kind, tool: toolCall, args: map[string]any{"application": application, "operationId": op,
		"requestId": "h-" + strconv.Itoa(i), "conversationId": "conv-" + strconv.Itoa(i%64), "arguments": args}}
}

// marked is a call of the operation marked for approval.
func marked(i int, justification string) call {
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	c := invoke("marked-"+justification, i, markedOp, map[string]any{
		"from": from.Format(time.RFC3339), "to": from.Add(time.Duration(i) * time.Second).Format(time.RFC3339)})
	c.args["justification"] = justification
	return c
}

// outcome is what the generator reads of a tool's answer
// (controller.ToolResult).
type outcome struct {
	Outcome   msg.State `json:"outcome"`
	Status    int       `json:"status"`
	AttemptID string    `json:"attemptId"`
	ReceiptID string    `json:"receiptId"`
	Replayed  bool      `json:"replayed"`
}

// tally counts outcomes by the call's kind and how it ended.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(kind string, o outcome) {
	key := kind + " " + string(o.Outcome)
	if o.Status != 0 {
		key += " " + strconv.Itoa(o.Status)
	}
	if o.Replayed {
		key += " replayed"
	}
	t.mu.Lock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[key]++
	t.mu.Unlock()
}

// caller makes calls as one agent session: MCP for most, the foreground
// socket for the calls that say so.
type caller struct {
	mcp *mcpSession
	fg  string // the foreground socket
	uid uint32 // the controller's account: the foreground socket's owner
}

// do makes one call to its end: a marked call still awaiting approval is
// asked again with its requestId, as an agent would, until it ends.
func (c *caller) do(ctx context.Context, k call) (outcome, json.RawMessage, error) {
	for {
		o, raw, err := c.once(ctx, k)
		if err != nil || o.Outcome != msg.StateAwaitingApproval {
			return o, raw, err
		}
	}
}

func (c *caller) once(ctx context.Context, k call) (outcome, json.RawMessage, error) {
	var raw json.RawMessage
	if k.fg {
		b, err := json.Marshal(k.args)
		if err != nil {
			return outcome{}, nil, err
		}
		rep, err := foreground.Call(ctx, c.fg, c.uid, foreground.Request{Op: foreground.OpSubmit, Tool: k.tool, Arguments: b})
		if err != nil {
			return outcome{}, nil, fmt.Errorf("foreground submit: %w", err)
		}
		if k.ack {
			if _, err := foreground.Call(ctx, c.fg, c.uid, foreground.Request{Op: foreground.OpAck, ID: rep.ID}); err != nil {
				return outcome{}, nil, fmt.Errorf("foreground ack: %w", err)
			}
		}
		raw = rep.Result
	} else {
		r, err := c.mcp.callTool(ctx, k.tool, k.args)
		if err != nil {
			return outcome{}, nil, err
		}
		raw = r.Structured
	}
	var o outcome
	if err := json.Unmarshal(raw, &o); err != nil {
		return outcome{}, nil, fmt.Errorf("%s answer %.200s: %w", k.tool, raw, err)
	}
	return o, raw, nil
}

// runBulk makes the bulk calls from..to (inclusive) over the callers,
// each taking the next index, and returns once all have ended.
func runBulk(ctx context.Context, callers []*caller, from, to int, t *tally) error {
	var next atomic.Int64
	next.Store(int64(from) - 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, c := range callers {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= to && ctx.Err() == nil; i = int(next.Add(1)) {
				k := bulk(i)
				o, _, err := c.do(ctx, k)
				if err != nil {
					once.Do(func() { first = fmt.Errorf("call %d (%s): %w", i, k.kind, err); cancel() })
					return
				}
				t.add(k.kind, o)
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
