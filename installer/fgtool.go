package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/foreground"
)

// foregroundTimeout bounds one exchange on the foreground socket. A tool
// call waits for its answer from the application (the route's response
// timeout, 30 s in the defaults), so this is generous; a controller that
// answers nothing within it is reported, not waited on forever.
const foregroundTimeout = 5 * time.Minute

// toolRequest is the file controller-tool reads.
type toolRequest struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// toolOutput is what the tool verbs print: the foreground reply, with the
// tool's result as the JSON the controller produced.
type toolOutput struct {
	ID     string          `json:"id,omitempty"` // absent for controller-attempts, which has none
	State  string          `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// parseToolRequest decodes a tool request strictly: valid JSON without
// duplicate keys, exactly the fields tool and arguments (an object;
// absent means {}), nothing after it.
func parseToolRequest(raw []byte) (toolRequest, error) {
	if _, err := canonjson.CanonicalJSON(raw); err != nil {
		return toolRequest{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r toolRequest
	if err := dec.Decode(&r); err != nil {
		return toolRequest{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return toolRequest{}, errors.New("data after the request object")
	}
	if r.Tool == "" {
		return toolRequest{}, errors.New(`"tool" is missing or empty`)
	}
	args := bytes.TrimSpace(r.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
		r.Arguments = json.RawMessage("{}")
	case args[0] != '{':
		return toolRequest{}, errors.New(`"arguments" is not a JSON object`)
	default:
		r.Arguments = args
	}
	return r, nil
}

// runControllerTool submits the operator's tool request over the
// controller's foreground socket and prints the result.
func runControllerTool(ctx context.Context, c *call, o options) int {
	owner, err := c.env.InvokingUID()
	if err != nil {
		return c.refusef("%v", err)
	}
	raw, err := ReadPrivateFile(o.operand, owner, ToolRequestLimit)
	if err != nil {
		return c.refusef("%v", err)
	}
	req, err := parseToolRequest(raw)
	if err != nil {
		return c.refusef("%s: %v", o.operand, err)
	}
	return c.foreground(ctx, foreground.Request{Op: foreground.OpSubmit, Tool: req.Tool, Arguments: req.Arguments})
}

// runControllerToolResult asks for the result of an earlier request.
func runControllerToolResult(ctx context.Context, c *call, o options) int {
	if err := checkRequestID(o.operand); err != nil {
		return c.refusef("%v", err)
	}
	return c.foreground(ctx, foreground.Request{Op: foreground.OpResult, ID: o.operand})
}

// runControllerToolAck acknowledges a result: the controller forgets it.
func runControllerToolAck(ctx context.Context, c *call, o options) int {
	if err := checkRequestID(o.operand); err != nil {
		return c.refusef("%v", err)
	}
	return c.foreground(ctx, foreground.Request{Op: foreground.OpAck, ID: o.operand})
}

// foreground sends one request on the foreground socket as the
// controller's account: the installer becomes that account for good before
// it reads the config or dials, and dials only the installed path
// (ControllerEnv.Foreground), refusing a config that names another, so
// that neither a path in the config the controller account writes nor a
// socket swapped under it can choose what it connects to. The socket must be the controller's: bound by the
// controller itself or made for it by systemd (wire.DialOwned).
func (c *call) foreground(ctx context.Context, req foreground.Request) int {
	if err := c.env.Controller.becomeController(); err != nil {
		return c.failf("%v", err)
	}
	files, err := c.env.Controller.locateController(false)
	if err != nil {
		return c.failf("%v", err)
	}
	// Only the installed path is dialled: the config is the controller
	// account's file, and a path in it must not choose what this verb
	// connects to (a root-owned socket, had root dialled it; or any socket
	// the controller account may reach, with the operator's bytes).
	path := c.env.Controller.Foreground
	if path == "" {
		return c.failf("no foreground socket path is set")
	}
	if files.config != nil && files.foreground != path {
		return c.failf("the installed config %s names the foreground socket %q, not the installed %q: not dialled (install a config naming the installed layout: steward-installer controller-config)",
			files.config.path, files.foreground, path)
	}
	// The controller refuses a foreground call without an allowance
	// before it journals anything; the installed config already says so,
	// so the operator hears it without a socket-activated start. The
	// controller stays the judge: a config installed but not yet running
	// is checked again there.
	if files.config != nil && req.Op == foreground.OpSubmit && req.Tool == foreground.ToolCall {
		if _, ok := files.config.cfg.ForegroundAllowance(); !ok {
			return c.refusef("%s: %v", files.config.path, ctlconf.ErrNoForegroundAllowance)
		}
	}
	owner := uint32(os.Geteuid())
	if _, err := os.Lstat(path); err != nil {
		return c.failf("the controller's foreground socket %s: %v (is the controller running?)", path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, foregroundTimeout)
	defer cancel()
	rep, err := foreground.Call(ctx, path, owner, req)
	out := toolOutput{ID: rep.ID, State: rep.State, Result: json.RawMessage(rep.Result), Error: rep.Error}
	if len(out.Result) == 0 {
		out.Result = nil
	}
	switch {
	case errors.Is(err, foreground.ErrRefused) && rep.State == foreground.StateInterrupted:
		c.printJSON(out)
		return c.failf("%s %s: %s", req.Op, rep.ID, rep.Error)
	case errors.Is(err, foreground.ErrRefused):
		return c.refusef("the controller refused the request: %s", rep.Error)
	case err != nil:
		return c.failf("the controller's foreground socket %s: %v", path, err)
	}
	if err := c.printJSON(out); err != nil {
		return c.failf("%v", err)
	}
	if rep.State == foreground.StateInterrupted {
		return ExitFail
	}
	return ExitOK
}

// printJSON writes v as one line of JSON.
func (c *call) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(append(b, '\n'))
	return err
}
