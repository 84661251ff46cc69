package host

import (
	"context"
	"fmt"
	"time"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The reverse channels: the host dials each route's reverse socket, the
// controller's, and asks the payer's consent on it (the store's
// operator.Payer) or tells it of a verdict. One channel a reverse socket,
// kept while it works and dialled again once it has failed.

// Consent sends reserve r to controller peer on route rt's reverse channel
// and returns the signed consent it answers, as it came: the store
// verifies it (operator.Payer). The wait ends with ctx, which the store
// bounds.
func (h *Host) Consent(ctx context.Context, rt *msg.RouteRecord, peer operator.Peer, r msg.Reserve) ([]byte, error) {
	cl, err := h.reverseClient(ctx, rt, peer)
	if err != nil {
		return nil, err
	}
	env, err := cl.Call(ctx, msg.TypeReserve, r)
	if err != nil {
		return nil, err
	}
	switch env.T {
	case msg.TypeConsent:
		var rep msg.ConsentReply
		if err := env.Decode(&rep); err != nil {
			return nil, err
		}
		return rep.Consent, nil
	case msg.TypeRefused:
		var ref msg.Refusal
		if err := env.Decode(&ref); err != nil {
			return nil, err
		}
		return nil, &operator.PayerRefusal{Refusal: ref}
	default:
		return nil, fmt.Errorf("unexpected %q reply to reserve", env.T)
	}
}

// AskDecided tells the controller, on the ask's route's reverse channel,
// that an ask of one of its attempts was decided (operator.Pushes), so a
// call parked on it collects at once. It runs in a goroutine of its own,
// counted as the host's work; a failure is logged and never retried: the
// push carries no authority, and the controller collects anyway when its
// park window ends.
func (h *Host) AskDecided(d operator.AskDecision) {
	if !h.enter() {
		h.log.Info("steward-operator: verdict not pushed: the host is shutting down; the controller collects when its park window ends", "ask", d.Ask, "attempt", d.Attempt)
		return
	}
	go func() {
		defer h.leave()
		ctx, cancel := context.WithTimeout(context.Background(), operator.ReserveTimeout)
		defer cancel()
		if err := h.sendVerdict(ctx, d); err != nil {
			h.log.Warn("steward-operator: verdict push failed; the controller collects when its park window ends", "ask", d.Ask, "attempt", d.Attempt, "err", err)
		}
	}()
}

// sendVerdict pushes one verdict and reads its acknowledgement.
func (h *Host) sendVerdict(ctx context.Context, d operator.AskDecision) error {
	rt, okRoute := h.s.SelectedRoute(d.Route)
	peer, okPeer := h.s.Peer(d.Controller)
	if !okRoute || !okPeer {
		return fmt.Errorf("no route %s of controller %s to push on", d.Route, d.Controller)
	}
	cl, err := h.reverseClient(ctx, &rt, peer)
	if err != nil {
		return err
	}
	env, err := cl.Call(ctx, msg.TypeVerdict, msg.VerdictPush{Attempt: d.Attempt, Ask: d.Ask, State: d.State})
	if err != nil {
		return err
	}
	if env.T != msg.TypeVerdictAck {
		return fmt.Errorf("unexpected %q reply to a verdict push", env.T)
	}
	return nil
}

// reverseClient returns the channel to a route's reverse socket, dialling
// it when there is none or the last one failed.
func (h *Host) reverseClient(ctx context.Context, rt *msg.RouteRecord, peer operator.Peer) (*wire.Client, error) {
	h.revMu.Lock()
	defer h.revMu.Unlock()
	if cl := h.reverse[rt.Reverse]; cl != nil {
		select {
		case <-cl.Done():
			delete(h.reverse, rt.Reverse)
		default:
			return cl, nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, time.Duration(rt.Timeouts.ConnectMs)*time.Millisecond)
	defer cancel()
	conn, err := wire.Dial(dctx, rt.Reverse, peer.UID, peer.UID)
	if err != nil {
		return nil, err
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: h.key, Role: msg.RoleHost, PeerRole: msg.RoleControllerDispatch, PeerKeys: peer.Dispatch,
		Path: rt.Reverse, Purpose: msg.PurposeCustody,
		SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	cl := wire.NewClient(ch)
	h.reverse[rt.Reverse] = cl
	return cl, nil
}

// closeReverse closes every reverse channel, at shutdown.
func (h *Host) closeReverse() {
	h.revMu.Lock()
	defer h.revMu.Unlock()
	for _, c := range h.reverse {
		c.Close()
	}
}
