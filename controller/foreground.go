package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
)

// Foreground socket caps. Its peers are operators' commands (by default
// root and the controller's own account), each one request on its own
// connection, so a few at once is plenty; one account may hold half, so
// that a stuck script of one cannot keep the other out.
const (
	fgMaxConns  = 16
	fgMaxPerUID = 8
)

func (c *Controller) listenForeground(pre *net.UnixListener) (*wire.Listener, error) {
	allowed := c.cfg.ForegroundPeers(uint32(os.Geteuid()))
	return bindOrAdopt(pre, wire.ListenConfig{
		Path: c.cfg.Sockets.Foreground,
		Mode: 0o600,
		Allow: func(p wire.PeerCred) error {
			if !slices.Contains(allowed, p.UID) {
				return fmt.Errorf("peer uid %d may not use the foreground socket", p.UID)
			}
			return nil
		},
		MaxConns:  fgMaxConns,
		MaxPerUID: fgMaxPerUID,
		Refuse: func(conn *net.UnixConn, reason error) {
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			foreground.WriteReply(conn, foreground.Reply{Error: reason.Error()})
		},
	})
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
// Each request (the first included) must come whole within c.firstRequest
// of the connection or of the last reply, and each reply must be taken
// within it, else the connection is answered (if it can be) and closed: a
// peer that says nothing, or reads nothing, cannot hold a slot.
func (c *Controller) foregroundConn(ctx context.Context, pc *wire.PeerConn) {
	defer pc.Close()
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	br := bufio.NewReader(pc)
	reply := func(rep foreground.Reply) error {
		pc.SetWriteDeadline(time.Now().Add(c.firstRequest))
		return foreground.WriteReply(pc, rep)
	}
	for {
		pc.SetReadDeadline(time.Now().Add(c.firstRequest))
		frame, err := wire.ReadFrame(br, wire.MaxRequestFrame)
		if err != nil {
			switch {
			case errors.Is(err, wire.ErrFrameTooLarge):
				reply(foreground.Reply{Error: err.Error()})
			case errors.Is(err, os.ErrDeadlineExceeded):
				c.log.Warn("foreground connection sent no request in time", "uid", pc.Cred.UID, "pid", pc.Cred.PID, "timeout", c.firstRequest)
				reply(foreground.Reply{Error: fmt.Sprintf("no request within %v; the connection is closed", c.firstRequest)})
			}
			return
		}
		var req foreground.Request
		var rep foreground.Reply
		if err := wire.Unmarshal(frame, &req); err != nil {
			rep = foreground.Reply{Error: "foreground request: " + err.Error()}
		} else {
			rep = c.foreground(ctx, req, pc.Cred.UID)
		}
		if err := reply(rep); err != nil {
			c.log.Warn("foreground reply", "err", err)
			return
		}
	}
}

// foreground answers one request of peer uid.
func (c *Controller) foreground(ctx context.Context, req foreground.Request, uid uint32) foreground.Reply {
	fail := func(err error) foreground.Reply { return foreground.Reply{ID: req.ID, Error: err.Error()} }
	switch req.Op {
	case foreground.OpSubmit:
		if req.Tool != ToolCall && req.Tool != ToolDiscover {
			return fail(fmt.Errorf("tool %q cannot run on the foreground socket (only %s and %s)", req.Tool, ToolDiscover, ToolCall))
		}
		// A call charges the payer, and its price is known only in the
		// host's reserve, after it is journaled: without an allowance
		// root granted, it is refused here, before anything is journaled,
		// consented or sent. A discovery goes on (free unless its grant
		// prices it, and then the payer refuses it at the reserve).
		if _, ok := c.cfg.ForegroundAllowance(); !ok && req.Tool == ToolCall {
			return fail(ctlconf.ErrNoForegroundAllowance)
		}
		p, err := c.plan(ctx, req.Tool, req.Arguments, ctlconf.PrincipalForeground)
		if err != nil {
			return fail(err)
		}
		id := newID()
		c.led.FgStart(id, req.Tool)
		if _, err := c.j.Append(ledger.KindFgSubmit, ledger.FgSubmit{ID: id, Tool: req.Tool, Arguments: p.args}); err != nil {
			c.led.FgAbort(id)
			return fail(fmt.Errorf("the controller journal refused the request; nothing was sent"))
		}
		res, _ := json.Marshal(c.dispatch(ctx, p, id))
		if _, err := c.j.Append(ledger.KindFgResult, ledger.FgResult{ID: id, Result: res}); err != nil {
			c.led.FgEnd(id, nil)
			return foreground.Reply{ID: id, State: foreground.StateInterrupted, Result: res, Error: "the result could not be journaled"}
		}
		c.led.FgEnd(id, res)
		return foreground.Reply{ID: id, State: foreground.StateDone, Result: res}
	case foreground.OpResult:
		st, err := c.led.FgLookup(req.ID)
		switch {
		case err != nil:
			return fail(err)
		case st.Running:
			return foreground.Reply{ID: req.ID, State: foreground.StateRunning}
		case st.Result == nil:
			msg, _ := json.Marshal(map[string]string{"attemptId": st.Attempt})
			return foreground.Reply{ID: req.ID, State: foreground.StateInterrupted, Result: msg}
		}
		return foreground.Reply{ID: req.ID, State: foreground.StateDone, Result: st.Result}
	case foreground.OpAck:
		st, err := c.led.FgLookup(req.ID)
		switch {
		case err != nil:
			return fail(err)
		case st.Running:
			return fail(fmt.Errorf("foreground request %q is still running", req.ID))
		}
		if _, err := c.j.Append(ledger.KindFgAck, ledger.FgAck{ID: req.ID}); err != nil {
			return fail(fmt.Errorf("the controller journal refused the acknowledgement"))
		}
		c.led.FgAcked(req.ID)
		return foreground.Reply{ID: req.ID, State: foreground.StateDone}
	case foreground.OpAttempts:
		b, _ := json.Marshal(c.led.UncertainAttempts()) // a list, never JSON null
		return foreground.Reply{State: foreground.StateDone, Result: b}
	case foreground.OpInspect, foreground.OpResolve:
		var ins Inspection
		var err error
		if req.Op == foreground.OpInspect {
			ins, err = c.Inspect(ctx, req.ID)
		} else {
			ins, err = c.Resolve(ctx, req.ID, "foreground")
		}
		if err != nil {
			rep := fail(err)
			rep.Refused = errors.Is(err, ErrRefused) // an archived attempt
			return rep
		}
		b, _ := json.Marshal(ins)
		return foreground.Reply{ID: req.ID, State: foreground.StateDone, Result: b}
	case foreground.OpHistorySnapshot, foreground.OpHistoryArchive, foreground.OpClockAccept:
		return c.foregroundHistory(req, uid)
	default:
		return fail(fmt.Errorf("unknown foreground operation %q", req.Op))
	}
}
