package operator

import (
	"context"
	"fmt"
	"sync"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The control socket: one per controller, beside the routes' forward
// sockets (msg/control.go). It is the controller's channel to the host
// that no route owns: its live route table (routes), the host's record of
// an attempt (inspect) and an agent's allowance (allowance). A controller
// with no route still has it, so a route the operator registers later is
// found there without restarting either daemon. It is bound like a forward
// socket: mode 0660, SO_PEERCRED uid the controller's, the forward caps, a
// signed refusal frame past them; the handshake is the forward socket's
// (RoleHost, the controller's tool key) with PurposeControl.

// controlSocket is one bound control socket and the controller it serves.
type controlSocket struct {
	controller string
	l          *wire.Listener
	cfg        wire.ChannelConfig
}

// listenControls binds the control socket of every controller that has
// one, appending each listener to *listeners (which Serve closes on its
// way out). A controller added before its control socket was recorded has
// none until `steward-operator controller control` and a restart.
func (h *Host) listenControls(listeners *[]*wire.Listener) ([]controlSocket, error) {
	type pinned struct {
		name, path string
		uid        uint32
		ring       *wire.Keyring
	}
	h.s.mu.Lock()
	var cs []pinned
	for _, n := range h.s.st.ctrlOrder {
		if c := h.s.st.controllers[n]; c.control != "" {
			cs = append(cs, pinned{name: n, path: c.control, uid: c.uid, ring: c.toolRing})
		}
	}
	h.s.mu.Unlock()
	var out []controlSocket
	for _, c := range cs {
		uid, name := c.uid, c.name
		l, err := wire.Listen(wire.ListenConfig{
			Path: c.path, Mode: 0o660,
			Allow: func(pc wire.PeerCred) error {
				if pc.UID != uid {
					return fmt.Errorf("%w: peer uid %d is not controller %s's uid %d", wire.ErrWrongPeer, pc.UID, name, uid)
				}
				return nil
			},
			MaxConns: maxForwardConns, MaxPerUID: maxForwardPerUID,
			Refuse: wire.RefuseFrame(h.key),
		})
		if err != nil {
			return nil, fmt.Errorf("controller %s: control socket: %w", name, err)
		}
		*listeners = append(*listeners, l)
		out = append(out, controlSocket{controller: name, l: l, cfg: wire.ChannelConfig{
			Key: h.key, Role: msg.RoleHost, PeerRole: msg.RoleControllerTool, PeerKeys: c.ring,
			Path: c.path, Purpose: msg.PurposeControl,
			SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
		}})
	}
	return out, nil
}

// serveControls runs the accept loop of each bound control socket until
// ctx ends or its listener closes; loops counts them.
func (h *Host) serveControls(ctx context.Context, loops *sync.WaitGroup, cs []controlSocket) {
	for _, c := range cs {
		loops.Add(1)
		go func() { defer loops.Done(); h.acceptLoop(ctx, c.l, h.controlHandler(c.controller), c.cfg, 0) }()
	}
}

// controlHandler answers routes, inspect and allowance on one controller's
// control channel. The controller is the channel's (its socket's peer
// uid and tool key), never a name in a frame.
func (h *Host) controlHandler(controller string) wire.Handler {
	return wire.HandlerFunc(func(_ context.Context, req *wire.Envelope) (string, any) {
		switch req.T {
		case msg.TypeRoutes:
			return h.answerRoutes(controller, req)
		case msg.TypeInspect:
			return h.answerInspect(controller, req)
		case msg.TypeAllowance:
			return h.answerAllowance(controller, req)
		default:
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: fmt.Sprintf("unknown request type %q on a control socket", req.T)}
		}
	})
}

// answerRoutes is the routes answer (msg.RoutesResult): the RouteIDs of
// the controller's active routes in the host's order, and the signed
// records of those the controller did not say it knows. Routes of other
// controllers are never in it.
func (h *Host) answerRoutes(controller string, req *wire.Envelope) (string, any) {
	var q msg.Routes
	if err := req.Decode(&q); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "routes: " + err.Error()}
	}
	if len(q.Known) > msg.MaxKnownRoutes {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest,
			Reason: fmt.Sprintf("routes: %d known route ids, the bound is %d", len(q.Known), msg.MaxKnownRoutes)}
	}
	known := make(map[string]bool, len(q.Known))
	for _, id := range q.Known {
		known[string(id)] = true
	}
	h.s.mu.Lock()
	revs := h.s.st.activeRoutes(controller)
	res := msg.RoutesResult{Active: make([][]byte, 0, len(revs))}
	for _, rv := range revs {
		// The state's bytes are never changed once recorded: the answer
		// may hold them after the lock.
		res.Active = append(res.Active, rv.id)
		if !known[string(rv.id)] {
			res.Records = append(res.Records, rv.signed)
		}
	}
	h.s.mu.Unlock()
	return msg.TypeRoutesResult, res
}

// answerInspect is the inspect answer of a forward or control channel:
// the host's record of one of the controller's attempts.
func (h *Host) answerInspect(controller string, req *wire.Envelope) (string, any) {
	var in msg.Inspect
	if err := req.Decode(&in); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "inspect: " + err.Error()}
	}
	res, err := h.s.Inspect(controller, in.Attempt)
	if err != nil {
		// The error names the journal's files: they go to the log, not
		// to the controller and its agents.
		h.log.Error("steward-operator: inspect: reading the host journal", "attempt", in.Attempt, "err", err)
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeJournal, Reason: inspectUnreadable}
	}
	return msg.TypeInspectResult, res
}

// answerAllowance is the allowance answer of a forward or control channel:
// what one agent of the controller may still spend and call.
func (h *Host) answerAllowance(controller string, req *wire.Envelope) (string, any) {
	var al msg.Allowance
	if err := req.Decode(&al); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "allowance: " + err.Error()}
	}
	if err := validDispatchAgent(al.Agent); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "allowance: " + err.Error()}
	}
	return msg.TypeAllowanceResult, h.s.Allowance(controller, al.Agent)
}
