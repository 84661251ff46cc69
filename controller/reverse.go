package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// listenReverse binds the reverse socket itself, never adopting one systemd
// made (see errAdoptedReverse): only the host's account may connect, and a
// refused peer gets a signed refusal frame.
func (c *Controller) listenReverse() (*wire.Listener, error) {
	host := c.bind.Bundle.HostUID
	return wire.Listen(wire.ListenConfig{
		Path: c.cfg.Sockets.Reverse,
		Mode: 0o660,
		Allow: func(p wire.PeerCred) error {
			if p.UID != host {
				return fmt.Errorf("%w: peer uid %d is not the host's uid %d", wire.ErrWrongPeer, p.UID, host)
			}
			return nil
		},
		MaxConns:  16,
		MaxPerUID: 16,
		Refuse:    wire.RefuseFrame(c.keys.Dispatch),
	})
}

// serveReverse accepts the host's custody channels until ln is closed.
func (c *Controller) serveReverse(ctx context.Context, ln *wire.Listener) {
	for {
		pc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Error("reverse socket accept", "err", err)
			}
			return
		}
		go c.reverseConn(ctx, pc)
	}
}

// reverseConn serves one custody channel: reserves, answered in order on
// the reading goroutine (a map lookup and a signature; the failpoint after
// a consent must fire after its reply has been written). The host sends
// nothing else here: a receipt reaches the controller once, in the
// dispatch result, and a controller that missed it asks with inspect.
func (c *Controller) reverseConn(ctx context.Context, pc *wire.PeerConn) {
	ch, err := wire.ServerHandshake(pc, wire.ChannelConfig{
		Key: c.keys.Dispatch, Role: msg.RoleControllerDispatch, PeerRole: msg.RoleHost,
		PeerKeys: c.bind.HostRing, Path: c.cfg.Sockets.Reverse, Purpose: msg.PurposeCustody,
		SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	})
	if err != nil {
		c.log.Warn("reverse handshake refused", "uid", pc.Cred.UID, "err", err)
		pc.Close()
		return
	}
	stop := context.AfterFunc(ctx, func() { ch.Close() })
	defer stop()
	defer ch.Close()
	for {
		env, err := ch.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				c.log.Warn("reverse channel closed", "err", err)
			}
			return
		}
		t, body := c.custody(env)
		if err := ch.Send(t, env.ID, body); err != nil {
			c.log.Warn("reverse reply", "err", err)
			return
		}
		if t == msg.TypeConsent {
			failpoint.Hit(FailAfterConsent)
		}
	}
}

func refusal(code, format string, a ...any) (string, any) {
	return msg.TypeRefused, msg.Refusal{Code: code, Reason: fmt.Sprintf(format, a...)}
}

// custody answers one reverse request.
func (c *Controller) custody(env *wire.Envelope) (string, any) {
	switch env.T {
	case msg.TypeReserve:
		var r msg.Reserve
		if err := env.Decode(&r); err != nil {
			return refusal(msg.CodeBadRequest, "reserve: %v", err)
		}
		return c.reserve(r)
	default:
		return refusal(msg.CodeBadRequest, "unexpected frame type %q on the reverse socket", env.T)
	}
}

// reserve consents, signed by the dispatch key, only to an attempt this
// process journaled in begin, with the same request hash, and only once
// (ledger.Consent). Attempts found at start are never consented to.
func (c *Controller) reserve(r msg.Reserve) (string, any) {
	if err := c.led.Consent(r, c.cfg.Name); err != nil {
		ref := err.(*msg.Refusal)
		if ref.Code == msg.CodeNoConsent {
			c.log.Warn("reserve refused", "attempt", r.Attempt, "reason", ref.Reason)
		}
		return msg.TypeRefused, *ref
	}
	signed, err := msg.SignConsent(c.keys.Dispatch, msg.Consent{
		Attempt: r.Attempt, Controller: r.Controller, Application: r.Application,
		Operation: r.Operation, RequestSHA256: r.RequestSHA256, Charge: r.Charge,
		At: time.Now().UnixMilli(),
	})
	if err != nil {
		return refusal(msg.CodeInternal, "signing consent: %v", err)
	}
	return msg.TypeConsent, msg.ConsentReply{Consent: signed}
}
