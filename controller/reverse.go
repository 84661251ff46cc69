package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
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

// reverseConn serves one custody channel: reserves and verdict pushes,
// answered in order on the reading goroutine (a map lookup and a
// signature, and for an attempt that awaited approval the fsync of its
// consented record; the failpoint after a consent must fire after its
// reply has been written). A receipt reaches the controller once, in the
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
	case msg.TypeVerdict:
		var v msg.VerdictPush
		if err := env.Decode(&v); err != nil {
			return refusal(msg.CodeBadRequest, "verdict: %v", err)
		}
		// A push only wakes the parked call: it carries no authority, and
		// the host's answer to the collect it prompts is what counts.
		c.asks.push(v)
		return msg.TypeVerdictAck, struct{}{}
	default:
		return refusal(msg.CodeBadRequest, "unexpected frame type %q on the reverse socket", env.T)
	}
}

// reserve consents, signed by the dispatch key, only to an attempt this
// process has a dispatch or a collect of in flight (inFlightRefusal),
// journaled in begin, with the same request hash, only once
// (ledger.Consent), only at the price of the grant the host cites, and
// only within the payer's policy (payer.take). Attempts found at start are
// never consented to.
func (c *Controller) reserve(r msg.Reserve) (string, any) {
	if ref := c.inFlightRefusal(r.Attempt); ref != nil {
		c.log.Warn("reserve refused", "attempt", r.Attempt, "code", ref.Code, "reason", ref.Reason)
		return msg.TypeRefused, *ref
	}
	if r.V != msg.CustodyV2 || r.Grant == nil {
		return refusal(msg.CodeNoConsent, "reserve version %d cites no grant: this controller consents only to a version %d reserve, which carries the grant it charges by", r.V, msg.CustodyV2)
	}
	g, err := c.grants.verify(r.Grant, c.bind.HostKey)
	if err != nil {
		c.log.Error("RESERVE REFUSED: the grant the host cites does not verify against the pinned host key", "attempt", r.Attempt, "err", err)
		return refusal(msg.CodeNoConsent, "the grant the reserve cites does not verify against the host key pinned in the bundle")
	}
	now := c.now()
	var principal string
	err = c.led.Consent(r, c.cfg.Name, func(b ledger.Begin) *msg.Refusal {
		if ref := grantAllows(g, r, b, now); ref != nil {
			return ref
		}
		principal = b.Principal
		return c.pay.take(b, r.Charge, r.RefusalPrice)
	})
	if err != nil {
		ref := err.(*msg.Refusal)
		if ref.Code == msg.CodeNoConsent || ref.Code == msg.CodePayerLimit {
			c.log.Warn("reserve refused", "attempt", r.Attempt, "code", ref.Code, "reason", ref.Reason)
		}
		return msg.TypeRefused, *ref
	}
	consent := msg.Consent{
		V: msg.CustodyV2, Attempt: r.Attempt, Controller: r.Controller, Principal: principal,
		Application: r.Application, Operation: r.Operation, RequestSHA256: r.RequestSHA256,
		GrantSHA256: msg.GrantHash(r.Grant), Charge: r.Charge, RefusalPrice: r.RefusalPrice,
		At: now.UnixMilli(),
	}
	signed, err := msg.SignConsent(c.keys.Dispatch, consent)
	if err != nil {
		c.pay.release(r.Attempt)
		return refusal(msg.CodeInternal, "signing consent: %v", err)
	}
	if c.led.NeedsConsentRecord(r.Attempt) {
		if ref := c.recordConsent(r, signed); ref != nil {
			return msg.TypeRefused, *ref
		}
	}
	c.pay.signed(r.Attempt, consent, signed)
	return msg.TypeConsent, msg.ConsentReply{Consent: signed}
}

// recordConsent journals the consented record of an attempt that awaited
// approval, before its consent leaves: a restart then knows it may have
// been reserved (uncertain) rather than awaiting approval, which it would
// consent to again. A record that cannot be journaled refuses the consent.
func (c *Controller) recordConsent(r msg.Reserve, signed []byte) *msg.Refusal {
	h := sha(signed)
	rec := ledger.Consented{Attempt: r.Attempt, ConsentSHA256: h[:], Amount: max(r.Charge, r.RefusalPrice)}
	if _, err := c.j.Append(ledger.KindConsented, rec); err != nil {
		c.pay.release(r.Attempt)
		c.log.Error("journal consented failed; the consent is refused", "attempt", r.Attempt, "err", err)
		return &msg.Refusal{Code: msg.CodeJournal, Reason: fmt.Sprintf("the controller could not journal its consent to attempt %s; nothing was consented", r.Attempt)}
	}
	c.led.ConsentRecorded(rec)
	return nil
}

// grantAllows checks that the grant the host cites is one under which b
// could have been admitted now, and that the reserve asks its prices: its
// price for an invocation, its discovery price for a listing or a
// descriptor, and its refusal price, never above that price (the host
// charges a refusal at most what it reserved).
func grantAllows(g msg.Grant, r msg.Reserve, b ledger.Begin, now time.Time) *msg.Refusal {
	price := g.DiscoveryPrice
	if b.Kind == msg.KindInvoke {
		price = g.Price
	}
	refusal := min(g.RefusalPrice, price)
	switch {
	case g.Controller != r.Controller || !g.Covers(b.Application, b.Operation):
		return &msg.Refusal{Code: msg.CodeNoConsent, Reason: fmt.Sprintf("the grant the reserve for attempt %s cites does not cover its application and operation", r.Attempt)}
	case !g.Live(now.UnixMilli()):
		return &msg.Refusal{Code: msg.CodeNoConsent, Reason: fmt.Sprintf("the grant the reserve for attempt %s cites is not in force by the controller's clock", r.Attempt)}
	case r.Charge != price || r.RefusalPrice != refusal:
		return &msg.Refusal{Code: msg.CodeNoConsent, Reason: fmt.Sprintf("the reserve for attempt %s asks %d credits (refusal %d), the grant it cites prices it at %d (refusal %d)", r.Attempt, r.Charge, r.RefusalPrice, price, refusal)}
	}
	return nil
}
