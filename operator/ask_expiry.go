package operator

import (
	"time"
)

// NextAskExpiry returns how long until the earliest expiry of the pending
// asks, or the earliest end of an approval's collect window (at once for
// an approval that has yet to be given one: ask_window.go), by the
// store's clock (ok false when there is none, or only asks whose record
// is being appended), and the signal closed at the next ask
// event (a new ask, an answer or an expiry), after which the earliest may
// differ. The wait is counted on the store's clock, not the wall's, so
// that the timer fires when ExpireDueAsks will find the ask due.
func (s *Store) NextAskExpiry() (time.Duration, bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next int64
	for _, k := range s.st.asksPending {
		if !k.answering && (next == 0 || k.ExpiresAt < next) {
			next = k.ExpiresAt
		}
	}
	now := s.clockLocked().UnixMilli()
	if w, ok := s.st.nextWindow(now); ok && (next == 0 || w < next) {
		next = w // an approval's collect window (ask_window.go)
	}
	if next == 0 {
		return 0, false, s.st.askSignal
	}
	return max(time.Duration(next-now)*time.Millisecond, 0), true, s.st.askSignal
}

// ExpireDueAsks records the expiry of every pending ask past its expiry
// by the store's clock: what the running host's timer does when
// NextAskExpiry's wait ends.
func (s *Store) ExpireDueAsks() error { return s.expireDue("") }
