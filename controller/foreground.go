package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/stewardrt/steward/wire"
)

// Foreground operations.
const (
	FgSubmit   = "submit"   // run a tool: {tool, arguments} -> {id, state, result}
	FgResult   = "result"   // {id} -> {id, state, result}
	FgAck      = "ack"      // {id} -> {id}: the result is forgotten
	FgAttempts = "attempts" // {} -> result: the uncertain attempts, JSON
	FgInspect  = "inspect"  // {id: attempt} -> result: Inspection, JSON
	FgResolve  = "resolve"  // {id: attempt} -> result: Inspection after resolving, JSON
)

// Foreground request states.
const (
	FgRunning     = "running"
	FgDone        = "done"
	FgInterrupted = "interrupted" // the controller restarted before the result was journaled
)

// ForegroundRequest is one request on the foreground socket: a 4-byte
// big-endian length and deterministic CBOR, at most wire.MaxRequestFrame
// bytes, unsigned. The socket admits only foregroundUids (root by default)
// by SO_PEERCRED; the installer that uses it holds no key.
type ForegroundRequest struct {
	Op        string `cbor:"op"`
	ID        string `cbor:"id"`
	Tool      string `cbor:"tool"`
	Arguments []byte `cbor:"arguments"` // the tool's arguments, JSON
}

// ForegroundReply answers a ForegroundRequest, at most wire.MaxReplyFrame.
type ForegroundReply struct {
	ID     string `cbor:"id"`
	State  string `cbor:"state"`
	Result []byte `cbor:"result"` // JSON
	Error  string `cbor:"error"`  // one line when the request was refused
}

// ErrForeground wraps a refusal answered on the foreground socket.
var ErrForeground = errors.New("foreground request refused")

func (c *Controller) listenForeground(pre *net.UnixListener) (*wire.Listener, error) {
	allowed := c.cfg.foregroundUIDs()
	return bindOrAdopt(pre, wire.ListenConfig{
		Path: c.cfg.Sockets.Foreground,
		Mode: 0o600,
		Allow: func(p wire.PeerCred) error {
			if !slices.Contains(allowed, p.UID) {
				return fmt.Errorf("peer uid %d may not use the foreground socket", p.UID)
			}
			return nil
		},
		MaxConns:  16,
		MaxPerUID: 16,
		Refuse: func(conn *net.UnixConn, reason error) {
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			writeFgReply(conn, ForegroundReply{Error: reason.Error()})
		},
	})
}

func writeFgReply(w io.Writer, r ForegroundReply) error {
	b, err := wire.Marshal(r)
	if err != nil {
		return err
	}
	return wire.WriteFrame(w, b, wire.MaxReplyFrame)
}

func (c *Controller) serveForeground(ctx context.Context, ln *wire.Listener) {
	for {
		pc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Error("foreground socket accept", "err", err)
			}
			return
		}
		go c.foregroundConn(ctx, pc)
	}
}

// foregroundConn serves requests one at a time. A frame past the bound is
// answered with the refusal and the connection closed; nothing is journaled.
func (c *Controller) foregroundConn(ctx context.Context, pc *wire.PeerConn) {
	defer pc.Close()
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	br := bufio.NewReader(pc)
	for {
		frame, err := wire.ReadFrame(br, wire.MaxRequestFrame)
		if err != nil {
			if errors.Is(err, wire.ErrFrameTooLarge) {
				writeFgReply(pc, ForegroundReply{Error: err.Error()})
			}
			return
		}
		var req ForegroundRequest
		var rep ForegroundReply
		if err := wire.Unmarshal(frame, &req); err != nil {
			rep = ForegroundReply{Error: "foreground request: " + err.Error()}
		} else {
			rep = c.foreground(ctx, req)
		}
		if err := writeFgReply(pc, rep); err != nil {
			c.log.Warn("foreground reply", "err", err)
			return
		}
	}
}

func (c *Controller) foreground(ctx context.Context, req ForegroundRequest) ForegroundReply {
	fail := func(err error) ForegroundReply { return ForegroundReply{ID: req.ID, Error: err.Error()} }
	switch req.Op {
	case FgSubmit:
		if req.Tool != ToolCall && req.Tool != ToolDiscover {
			return fail(fmt.Errorf("tool %q cannot run on the foreground socket (only %s and %s)", req.Tool, ToolDiscover, ToolCall))
		}
		p, err := c.plan(req.Tool, req.Arguments)
		if err != nil {
			return fail(err)
		}
		id := newID()
		done := make(chan struct{})
		c.led.mu.Lock()
		c.led.fg[id] = &fgEntry{tool: req.Tool, done: done}
		c.led.mu.Unlock()
		if _, err := c.j.Append(kindFgSubmit, fgSubmitRecord{ID: id, Tool: req.Tool, Arguments: p.args}); err != nil {
			c.led.mu.Lock()
			delete(c.led.fg, id)
			c.led.mu.Unlock()
			return fail(fmt.Errorf("the controller journal refused the request; nothing was sent"))
		}
		res, _ := json.Marshal(c.dispatch(ctx, p, id))
		_, err = c.j.Append(kindFgResult, fgResultRecord{ID: id, Result: res})
		c.led.mu.Lock()
		if err == nil {
			c.led.fg[id].result = res
		}
		close(done)
		c.led.mu.Unlock()
		if err != nil {
			return ForegroundReply{ID: id, State: FgInterrupted, Result: res, Error: "the result could not be journaled"}
		}
		return ForegroundReply{ID: id, State: FgDone, Result: res}
	case FgResult:
		c.led.mu.Lock()
		defer c.led.mu.Unlock()
		e := c.led.fg[req.ID]
		if e == nil {
			return fail(fmt.Errorf("no foreground request %q awaits acknowledgement", req.ID))
		}
		select {
		case <-e.done:
		default:
			return ForegroundReply{ID: req.ID, State: FgRunning}
		}
		if e.result == nil {
			msg, _ := json.Marshal(map[string]string{"attemptId": e.attempt})
			return ForegroundReply{ID: req.ID, State: FgInterrupted, Result: msg}
		}
		return ForegroundReply{ID: req.ID, State: FgDone, Result: e.result}
	case FgAck:
		c.led.mu.Lock()
		e := c.led.fg[req.ID]
		c.led.mu.Unlock()
		if e == nil {
			return fail(fmt.Errorf("no foreground request %q awaits acknowledgement", req.ID))
		}
		select {
		case <-e.done:
		default:
			return fail(fmt.Errorf("foreground request %q is still running", req.ID))
		}
		if _, err := c.j.Append(kindFgAck, fgAckRecord{ID: req.ID}); err != nil {
			return fail(fmt.Errorf("the controller journal refused the acknowledgement"))
		}
		c.led.mu.Lock()
		delete(c.led.fg, req.ID)
		c.led.mu.Unlock()
		return ForegroundReply{ID: req.ID, State: FgDone}
	case FgAttempts:
		b, _ := json.Marshal(c.led.uncertain())
		return ForegroundReply{State: FgDone, Result: b}
	case FgInspect, FgResolve:
		var ins Inspection
		var err error
		if req.Op == FgInspect {
			ins, err = c.Inspect(ctx, req.ID)
		} else {
			ins, err = c.Resolve(ctx, req.ID, "foreground")
		}
		if err != nil {
			return fail(err)
		}
		b, _ := json.Marshal(ins)
		return ForegroundReply{ID: req.ID, State: FgDone, Result: b}
	default:
		return fail(fmt.Errorf("unknown foreground operation %q", req.Op))
	}
}

// ForegroundCall sends one request on the foreground socket and returns the
// reply; a reply carrying an error is returned as an error wrapping
// ErrForeground, with the reply.
func ForegroundCall(ctx context.Context, socket string, req ForegroundRequest) (ForegroundReply, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return ForegroundReply{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	b, err := wire.Marshal(req)
	if err != nil {
		return ForegroundReply{}, err
	}
	// A frame past the bound is still sent: the controller owns the bound
	// and answers with the refusal naming it, possibly before it has read
	// the whole frame, so the reply is read while the frame is written.
	werr := make(chan error, 1)
	go func() { werr <- wire.WriteFrame(conn, b, len(b)) }()
	frame, err := wire.ReadFrame(bufio.NewReader(conn), wire.MaxReplyFrame)
	if err != nil {
		if e := <-werr; e != nil {
			err = e
		}
		return ForegroundReply{}, fmt.Errorf("foreground %s: %w", req.Op, err)
	}
	var rep ForegroundReply
	if err := wire.Unmarshal(frame, &rep); err != nil {
		return ForegroundReply{}, fmt.Errorf("foreground %s: %w", req.Op, err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("%w: %s", ErrForeground, rep.Error)
	}
	return rep, nil
}
