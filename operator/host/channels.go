package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The host's channels: every socket it listens on is accepted here
// (acceptLoop), each connection's peer checked by the kernel's word before
// its handshake, and served by one handler; the forward sockets' handler
// is here too (routeHandler), the control sockets' in control.go and the
// admin and approvals sockets' in admin.go and approvals.go.

// Connection caps of a forward listener.
const (
	maxForwardConns  = 64
	maxForwardPerUID = 16
)

// listenForController binds path as a socket only controller peer dials:
// a route's forward socket or its control socket. Mode 0660, the peer's
// SO_PEERCRED uid the controller's, the forward caps and a signed refusal
// frame past them.
func (h *Host) listenForController(peer operator.Peer, path string) (*wire.Listener, error) {
	uid, name := peer.UID, peer.Name
	return wire.Listen(wire.ListenConfig{
		Path: path, Mode: 0o660,
		Allow: func(pc wire.PeerCred) error {
			if pc.UID != uid {
				return fmt.Errorf("%w: peer uid %d is not controller %s's uid %d", wire.ErrWrongPeer, pc.UID, name, uid)
			}
			return nil
		},
		MaxConns: maxForwardConns, MaxPerUID: maxForwardPerUID,
		Refuse: wire.RefuseFrame(h.key),
	})
}

// controllerChannel is the handshake of a socket controller peer dials
// with its tool key (listenForController), for purpose.
func (h *Host) controllerChannel(peer operator.Peer, path, purpose string) wire.ChannelConfig {
	return wire.ChannelConfig{
		Key: h.key, Role: msg.RoleHost, PeerRole: msg.RoleControllerTool, PeerKeys: peer.Tool,
		Path: path, Purpose: purpose,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
}

// acceptLoop accepts admitted connections until the listener closes. A
// connection that completes its handshake is marked proven (the admin
// socket evicts only those that have not); idle, when not 0, bounds the
// quiet between its requests (wire.ServeIdle). A forward channel has no
// such bound: the controller keeps it open between calls.
func (h *Host) acceptLoop(ctx context.Context, l *wire.Listener, hd wire.Handler, cfg wire.ChannelConfig, idle time.Duration) {
	h.acceptLoopWith(ctx, l, hd, idle, func(pc *wire.PeerConn) (*wire.Channel, error) {
		return wire.ServerHandshake(pc, cfg)
	})
}

// acceptLoopWith is acceptLoop with the handshake each connection goes
// through before it is proven: the approvals socket's trades keys first.
func (h *Host) acceptLoopWith(ctx context.Context, l *wire.Listener, hd wire.Handler, idle time.Duration, handshake func(*wire.PeerConn) (*wire.Channel, error)) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		pc, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				h.log.Error("steward-operator: accept", "socket", l.Path(), "err", err)
			}
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer pc.Close()
			ch, err := handshake(pc)
			if err != nil {
				h.log.Warn("steward-operator: handshake refused", "socket", l.Path(), "uid", pc.Cred.UID, "err", err)
				return
			}
			pc.Proven()
			err = wire.ServeIdle(withPeer(ctx, pc.Cred), ch, hd, idle)
			if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				h.log.Info("steward-operator: closed a channel idle past its bound", "socket", l.Path(), "uid", pc.Cred.UID, "idle", idle)
				return
			}
			if err != nil && ctx.Err() == nil && !isEOF(err) {
				h.log.Warn("steward-operator: channel closed", "socket", l.Path(), "err", err)
			}
		}()
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed)
}

// inspectUnreadable is the refusal of an inspect whose outcome record the
// host journal could not give back.
const inspectUnreadable = "the host journal could not be read; the attempt's outcome is unknown here until the host is restarted"

// routeHandler answers dispatch, collect, inspect and allowance on the
// forward channels of the listener at. The store serves a dispatch by its
// route's selected revision as it is when the dispatch arrives, and
// refuses it (unavailable, nothing journaled) once the route is not active
// or its revision is served on another socket or for another controller
// (operator.Store.Dispatch): the listener may be closed while its
// channels stay open. Inspect and allowance reserve nothing and are
// answered for the listener's controller either way.
func (h *Host) routeHandler(at operator.ForwardSocket) wire.Handler {
	return wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		switch req.T {
		case msg.TypeDispatch:
			var d msg.Dispatch
			if err := req.Decode(&d); err != nil {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "dispatch: " + err.Error()}
			}
			if !h.enter() {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host is shutting down"}
			}
			defer h.leave()
			return msg.TypeDispatchResult, h.s.Dispatch(ctx, at, &d)
		case msg.TypeCollect:
			var col msg.Collect
			if err := req.Decode(&col); err != nil {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "collect: " + err.Error()}
			}
			if !h.enter() {
				return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "the host is shutting down"}
			}
			defer h.leave()
			return msg.TypeDispatchResult, h.s.Collect(ctx, at, &col)
		case msg.TypeInspect:
			return h.answerInspect(at.Controller, req)
		case msg.TypeAllowance:
			return h.answerAllowance(at.Controller, req)
		default:
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: fmt.Sprintf("unknown request type %q on a forward socket", req.T)}
		}
	})
}
