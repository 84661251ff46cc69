package operator

import (
	"context"
	"time"
)

// expireAsks ends each pending ask at its expiry while the host runs, so
// that its "expired" log line and its verdict push come when it expires,
// not when something next reads it. Every read applies expiry first as
// well (Store.expireDue): the store's clock, which never goes back, may be
// ahead of this timer's wall clock, and a store opened by a command has no
// timer. A failed expiry record is logged and not retried here (a full
// disk would turn a retry into a loop): the next ask event or read tries
// again.
func (h *Host) expireAsks(ctx context.Context) {
	for {
		in, ok, signal := h.s.nextExpiry()
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
			err := h.s.expireDue("")
			if err != nil {
				h.log.Error("steward-operator: ask expiry record; the ask stays pending until the next event or read", "err", err)
			}
			// An ask still due now was not expired (a failed record, or a
			// clock that does not move, as a test's): wait for the next
			// event rather than fire again at once.
			if in, ok, _ := h.s.nextExpiry(); err != nil || ok && in == 0 {
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

// nextExpiry returns how long until the earliest expiry of the pending
// asks by the store's clock (ok false when none is pending, or only asks
// whose answer is being appended), and the signal closed at the next ask
// event (a new ask, an answer or an expiry), after which the earliest may
// differ. The wait is counted on the store's clock, not the wall's, so
// that the timer fires when expireDue will find the ask due.
func (s *Store) nextExpiry() (time.Duration, bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next int64
	for _, k := range s.st.asksPending {
		if !k.answering && (next == 0 || k.expiresAt < next) {
			next = k.expiresAt
		}
	}
	if next == 0 {
		return 0, false, s.st.askSignal
	}
	return max(time.Duration(next-s.clockLocked().UnixMilli())*time.Millisecond, 0), true, s.st.askSignal
}
