package operator

import (
	"context"
	"fmt"

	"github.com/stewardrt/steward/wire/msg"
)

// pushVerdict tells the controller, on the ask's route's reverse channel,
// that an ask of one of its attempts was decided (Store.askDecided), so a
// call parked on it collects at once. It runs in a goroutine of its own,
// counted as the host's work; a failure is logged and never retried: the
// push carries no authority, and the controller collects anyway when its
// park window ends.
func (h *Host) pushVerdict(d askDecision) {
	if !h.enter() {
		h.log.Info("steward-operator: verdict not pushed: the host is shutting down; the controller collects when its park window ends", "ask", d.ask, "attempt", d.attempt)
		return
	}
	go func() {
		defer h.leave()
		ctx, cancel := context.WithTimeout(context.Background(), reserveTimeout)
		defer cancel()
		if err := h.sendVerdict(ctx, d); err != nil {
			h.log.Warn("steward-operator: verdict push failed; the controller collects when its park window ends", "ask", d.ask, "attempt", d.attempt, "err", err)
		}
	}()
}

// sendVerdict pushes one verdict and reads its acknowledgement.
func (h *Host) sendVerdict(ctx context.Context, d askDecision) error {
	h.s.mu.Lock()
	r, c := h.s.st.routes[d.route], h.s.st.controllers[d.controller]
	var rt msg.RouteRecord
	if r != nil {
		rt = r.selected().rec
	}
	h.s.mu.Unlock()
	if r == nil || c == nil {
		return fmt.Errorf("no route %s of controller %s to push on", d.route, d.controller)
	}
	cl, err := h.reverseClient(ctx, &rt, c)
	if err != nil {
		return err
	}
	env, err := cl.Call(ctx, msg.TypeVerdict, msg.VerdictPush{Attempt: d.attempt, Ask: d.ask, State: d.state})
	if err != nil {
		return err
	}
	if env.T != msg.TypeVerdictAck {
		return fmt.Errorf("unexpected %q reply to a verdict push", env.T)
	}
	return nil
}
