package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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

// maxSettlesInFlight bounds the settles one custody channel answers at once
// off its reading goroutine; past it the reader answers them itself, so a
// host that floods settles slows only its own channel.
const maxSettlesInFlight = 64

// reverseConn serves one custody channel. A reserve is answered on the
// reading goroutine (a map lookup and a signature, and the failpoint after
// a consent must fire after its reply has been written); a settle, which
// no call waits for, is answered on its own goroutine, so that the reserves
// of calls in flight are not queued behind the receipt checks of finished
// ones.
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
	var settles sync.WaitGroup
	defer settles.Wait() // before the close: their replies go out first
	sem := make(chan struct{}, maxSettlesInFlight)
	for {
		env, err := ch.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				c.log.Warn("reverse channel closed", "err", err)
			}
			return
		}
		if env.T == msg.TypeSettle {
			select {
			case sem <- struct{}{}:
				settles.Go(func() {
					defer func() { <-sem }()
					t, body := c.custody(env)
					if err := ch.Send(t, env.ID, body); err != nil {
						c.log.Warn("reverse reply", "err", err)
						ch.Close()
					}
				})
				continue
			default:
			}
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
	case msg.TypeSettle:
		var s msg.Settle
		if err := env.Decode(&s); err != nil {
			return refusal(msg.CodeBadRequest, "settle: %v", err)
		}
		return c.settle(s)
	default:
		return refusal(msg.CodeBadRequest, "unexpected frame type %q on the reverse socket", env.T)
	}
}

// reserve consents, signed by the dispatch key, only to an attempt this
// process journaled in begin, with the same request hash, and only once.
// Attempts found at start are never consented to: whether they were
// consented to before the restart cannot be known.
func (c *Controller) reserve(r msg.Reserve) (string, any) {
	c.led.mu.Lock()
	e := c.led.open[r.Attempt]
	switch {
	case e == nil:
		c.led.mu.Unlock()
		return refusal(msg.CodeUnknown, "no journaled begin for attempt %s", r.Attempt)
	case !e.live:
		c.led.mu.Unlock()
		return refusal(msg.CodeNoConsent, "attempt %s predates this controller process and is pending inspection", r.Attempt)
	case e.state != StatePending:
		c.led.mu.Unlock()
		return refusal(msg.CodeNoConsent, "attempt %s is %s", r.Attempt, e.state)
	case e.consented:
		c.led.mu.Unlock()
		return refusal(msg.CodeDuplicate, "attempt %s was already consented to", r.Attempt)
	case r.Controller != c.cfg.Name || r.Application != e.begin.Application ||
		r.Operation != e.begin.Operation || !bytes.Equal(r.RequestSHA256, e.begin.RequestSHA256):
		c.led.mu.Unlock()
		c.log.Warn("reserve does not match the journaled begin", "attempt", r.Attempt)
		return refusal(msg.CodeNoConsent, "reserve for attempt %s does not match its journaled begin", r.Attempt)
	}
	e.consented = true
	c.led.mu.Unlock()
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

// settle verifies a receipt against the pinned host key and matches it to
// its attempt. The durable copy of the receipt is the result record (from
// the dispatch reply); a settle that disagrees with it is logged loudly.
func (c *Controller) settle(s msg.Settle) (string, any) {
	h := msg.ReceiptHash(s.Receipt)
	c.led.mu.Lock()
	if _, open := c.led.open[s.Attempt]; !open {
		if prev, ok := c.led.recent[s.Attempt]; ok && bytes.Equal(prev, h) {
			// The very bytes verified before the result was journaled.
			c.led.mu.Unlock()
			return msg.TypeSettled, msg.Settled{Attempt: s.Attempt}
		}
	}
	c.led.mu.Unlock()
	rc, err := c.verifiedReceipt(s.Attempt, s.Receipt)
	if err != nil {
		c.log.Error("SETTLE REFUSED: receipt does not verify against the host key", "attempt", s.Attempt, "err", err)
		return refusal(msg.CodeBadRequest, "settle: %v", err)
	}
	if rc.Attempt != s.Attempt {
		c.log.Error("SETTLE REFUSED: receipt names another attempt", "attempt", s.Attempt, "receipt", rc.Attempt)
		return refusal(msg.CodeBadRequest, "settle for attempt %s carries the receipt of attempt %s", s.Attempt, rc.Attempt)
	}
	c.led.mu.Lock()
	defer c.led.mu.Unlock()
	if e := c.led.open[s.Attempt]; e != nil {
		if !bytes.Equal(rc.RequestSHA256, e.begin.RequestSHA256) {
			c.log.Error("SETTLE MISMATCH: receipt request hash differs from the journaled begin", "attempt", s.Attempt)
			return refusal(msg.CodeBadRequest, "settle for attempt %s: request hash does not match its begin", s.Attempt)
		}
		e.settled = h
		return msg.TypeSettled, msg.Settled{Attempt: s.Attempt}
	}
	if prev, ok := c.led.recent[s.Attempt]; ok {
		if !bytes.Equal(prev, h) {
			c.log.Error("SETTLE MISMATCH: the host settled a different receipt than the journaled result", "attempt", s.Attempt)
			return refusal(msg.CodeBadRequest, "settle for attempt %s does not match its journaled receipt", s.Attempt)
		}
		return msg.TypeSettled, msg.Settled{Attempt: s.Attempt}
	}
	c.log.Warn("settle for an attempt not open here", "attempt", s.Attempt)
	return refusal(msg.CodeUnknown, "attempt %s is not open here", s.Attempt)
}
