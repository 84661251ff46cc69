package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outcome is what a client last heard of a requestId.
type outcome string

// What a client can hear of a call. definite, refused, not-sent and
// uncertain are the controller's outcomes; errored is a call that got no
// tool result at all (the session broke: the controller died).
const (
	outDefinite  outcome = "definite"
	outRefused   outcome = "refused"
	outNotSent   outcome = "not-sent"
	outUncertain outcome = "uncertain"
	outErrored   outcome = "errored"
)

// call is one requestId as the agent sees it.
type call struct {
	id    string
	args  map[string]any
	tries int
	heard map[string]int // every answer it got, by outcome (and refusal code: "refused:uncertain")
	last  outcome
	// chaosLast is last as it was when the chaos phase ended, before the
	// harness's final retry.
	chaosLast outcome
	attempts  map[string]bool // attempt ids the controller named in its answers
	status    int             // the application's status, once definite
}

// callBook is every requestId the clients issued.
type callBook struct {
	mu    sync.Mutex
	calls map[string]*call
}

func (l *callBook) add(c *call) {
	l.mu.Lock()
	l.calls[c.id] = c
	l.mu.Unlock()
}

// controllerUp is closed when the controller of the current generation is
// ready; clients whose session broke wait on it before dialing again, so
// that no client spins against a socket nobody serves.
type controllerUp struct {
	mu sync.Mutex
	up chan struct{}
}

func newControllerUp() *controllerUp { return &controllerUp{up: make(chan struct{})} }

// down marks the controller dead: later waits block until ready.
func (c *controllerUp) down() {
	c.mu.Lock()
	select {
	case <-c.up:
		c.up = make(chan struct{})
	default:
	}
	c.mu.Unlock()
}

// ready releases every waiting client.
func (c *controllerUp) ready() {
	c.mu.Lock()
	select {
	case <-c.up:
	default:
		close(c.up)
	}
	c.mu.Unlock()
}

func (c *controllerUp) wait(ctx context.Context) error {
	c.mu.Lock()
	up := c.up
	c.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// client is one agent: an MCP session over the controller's socket, its
// calls with fresh requestIds, and the ones it must retry.
type client struct {
	n      int
	socket string
	up     *controllerUp
	book   *callBook
	cs     *mcp.ClientSession
	seq    int
	retry  []*call // answered with an error or an uncertain outcome
}

// session returns an open session, dialing once the controller is up.
func (c *client) session(ctx context.Context) (*mcp.ClientSession, error) {
	if c.cs != nil {
		return c.cs, nil
	}
	if err := c.up.wait(ctx); err != nil {
		return nil, err
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, err
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "steward-crashtest", Version: "v1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.cs = cs
	return cs, nil
}

// dropSession forgets a broken session.
func (c *client) dropSession() {
	if c.cs != nil {
		c.cs.Close()
		c.cs = nil
	}
}

// run issues calls until ctx ends: every other call is a retry of an
// earlier unfinished requestId when there is one, as an agent retries the
// same requestId after an error or an uncertain answer.
func (c *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		var k *call
		if len(c.retry) > 0 && c.seq%2 == 1 {
			k, c.retry = c.retry[0], c.retry[1:]
		} else {
			k = c.fresh()
		}
		c.seq++
		c.do(ctx, k)
	}
	c.dropSession()
}

// fresh makes a call with a new requestId.
func (c *client) fresh() *call {
	id := fmt.Sprintf("r-%d-%d", c.n, c.seq)
	k := &call{id: id, heard: map[string]int{}, attempts: map[string]bool{},
		args: map[string]any{"application": "appliance", "requestId": id, "conversationId": fmt.Sprintf("c-%d", c.n),
			"operationId": "calc.evaluate", "arguments": map[string]any{"expression": fmt.Sprintf("%d + %d", c.n, c.seq)}}}
	c.book.add(k)
	return k
}

// do makes one try of k and records what it heard; an unfinished call is
// queued for a retry.
func (c *client) do(ctx context.Context, k *call) {
	o, code := c.try(ctx, k)
	if ctx.Err() != nil && o == outErrored {
		// The run ended mid-call: not an answer, and k stays as it was.
		c.retry = append(c.retry, k)
		return
	}
	c.book.mu.Lock()
	k.tries++
	if code != "" {
		k.heard[string(o)+":"+code]++
	} else {
		k.heard[string(o)]++
	}
	k.last = o
	c.book.mu.Unlock()
	if o != outDefinite {
		c.retry = append(c.retry, k)
	}
}

// toolResult is the part of oracle_call's structured result the harness reads.
type toolResult struct {
	Outcome   outcome `json:"outcome"`
	Status    int     `json:"status"`
	AttemptID string  `json:"attemptId"`
	Refusal   *struct {
		Code string `json:"code"`
	} `json:"refusal"`
}

// try makes one call of k and returns its outcome and refusal code.
func (c *client) try(ctx context.Context, k *call) (outcome, string) {
	cs, err := c.session(ctx)
	if err != nil {
		return outErrored, ""
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "oracle_call", Arguments: k.args})
	if err != nil {
		c.dropSession()
		return outErrored, ""
	}
	var r toolResult
	b, err := json.Marshal(res.StructuredContent)
	if err != nil || json.Unmarshal(b, &r) != nil || r.Outcome == "" {
		return outErrored, "no structured result"
	}
	c.book.mu.Lock()
	if r.AttemptID != "" {
		k.attempts[r.AttemptID] = true
	}
	if r.Outcome == outDefinite {
		k.status = r.Status
	}
	c.book.mu.Unlock()
	if r.Refusal != nil {
		return r.Outcome, r.Refusal.Code
	}
	return r.Outcome, ""
}
