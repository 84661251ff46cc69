package host

import (
	"context"
	"time"
)

// The host's timers: the checkpointer, woken by the store when a receipt
// is durable, and the expiry of pending asks.

// checkpointInterval is the least time between two checkpoints.
const checkpointInterval = time.Second

// checkpointLoop signs the durable receipt chain head after outcomes are
// journaled, at most once per checkpointInterval: every receipt is covered
// by a hybrid (post-quantum) signature within about a second.
func (h *Host) checkpointLoop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		if wait := checkpointInterval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return // Serve signs the last checkpoint after the work drains
			case <-t.C:
			}
		}
		if err := h.s.Checkpoint(); err != nil {
			h.log.Error("steward-operator: checkpoint", "err", err)
		}
		last = time.Now()
	}
}

// expireAsks ends each pending ask at its expiry while the host runs, so
// that its "expired" log line and its verdict push come when it expires,
// not when something next reads it. Every read applies expiry first as
// well (operator.Store.ExpireDueAsks): the store's clock, which never goes back, may be
// ahead of this timer's wall clock, and a store opened by a command has no
// timer. A failed expiry record is logged and not retried here (a full
// disk would turn a retry into a loop): the next ask event or read tries
// again.
func (h *Host) expireAsks(ctx context.Context) {
	for {
		in, ok, signal := h.s.NextAskExpiry()
		var fire <-chan time.Time
		var t *time.Timer
		if ok {
			t = time.NewTimer(in)
			fire = t.C
		}
		select {
		case <-ctx.Done():
		case <-signal:
		case <-fire:
			err := h.s.ExpireDueAsks()
			if err != nil {
				h.log.Error("steward-operator: ask expiry record; the ask stays pending until the next event or read", "err", err)
			}
			// An ask still due now was not expired (a failed record, or a
			// clock that does not move, as a test's): wait for the next
			// event rather than fire again at once.
			if in, ok, _ := h.s.NextAskExpiry(); err != nil || ok && in == 0 {
				select {
				case <-ctx.Done():
				case <-signal:
				}
			}
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// ReceiptDurable wakes the checkpointer (operator.Pushes): a receipt's
// record is durable, so there is a head to sign.
func (h *Host) ReceiptDurable() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}
