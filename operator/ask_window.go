package operator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Collect windows (DESIGN.md section 5, "Collect window"): ask-lapsed, ask-window.

// windowAt is when approved ask k's window needs work (with s.mu held):
// at once for one approved before windows (to give it one), at collectBy
// to lapse it; 0 when it has none to watch (it expires to approve, its
// attempt went on or is claimed, or a record of it is on its way).
func (st *state) windowAt(k *ask, now int64) int64 {
	if k.State != msg.AskApproved || k.answering || k.OnTimeout != msg.VerdictDeny {
		return 0
	}
	if at := st.Attempts[k.Attempt]; at == nil || at.Ask != k.ID || at.State != msg.StateAwaitingApproval || at.collecting {
		return 0
	}
	if k.CollectBy == 0 {
		return now
	}
	return k.CollectBy
}

// windowDue reports whether k's window needs work at now (s.mu held).
func (st *state) windowDue(k *ask, now int64) bool {
	t := st.windowAt(k, now)
	return t != 0 && now >= t
}

// nextWindow is the earliest instant a window needs work, with s.mu held.
func (st *state) nextWindow(now int64) (next int64, ok bool) {
	for _, k := range st.Asks {
		if t := st.windowAt(k, now); t != 0 && (next == 0 || t < next) {
			next = t
		}
	}
	return next, next != 0
}

// windowsDueLocked does the windows' work due now (of ask id alone when
// id is not empty), with s.askMu held, after the expiries.
func (s *Store) windowsDueLocked(id string) error {
	s.mu.Lock()
	now := s.clockLocked().UnixMilli()
	var due []*ask
	asks := s.st.Asks
	if id != "" { // a read of one ask looks at it alone
		asks = map[string]*ask{id: s.st.Asks[id]}
	}
	for _, k := range asks {
		if k != nil && s.st.windowDue(k, now) {
			due = append(due, k)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(due, func(a, b *ask) int { return strings.Compare(a.ID, b.ID) })
	var err error
	for i := 0; i < len(due) && err == nil; i++ {
		err = s.windowStep(due[i])
	}
	return err
}

// windowStep journals what k's window needs now, checked again and
// claimed (answering) under s.mu so that no collect claims the attempt
// meanwhile, and applies it. Called with s.askMu held.
func (s *Store) windowStep(k *ask) error {
	s.mu.Lock()
	now := s.clockLocked().UnixMilli()
	if !s.st.windowDue(k, now) {
		s.mu.Unlock()
		return nil
	}
	k.answering = true
	kind, rec := hostlog.KindAskLapsed, any(hostlog.AskLapsed{Ask: k.ID, Verdict: k.OnTimeout, At: k.CollectBy})
	if k.CollectBy == 0 {
		kind, rec = hostlog.KindAskWindow, hostlog.AskWindow{Ask: k.ID, CollectBy: now + k.ExpiresAt - k.RaisedAt}
	}
	s.mu.Unlock()
	seq, err := s.append(kind, rec)
	s.mu.Lock()
	k.answering = false
	w, window := rec.(hostlog.AskWindow)
	switch {
	case err != nil:
		s.mu.Unlock()
		return fmt.Errorf("ask %s: the host could not journal its collect window: %w", k.ID, err)
	case window:
		s.st.windowGiven(k, w.CollectBy)
	default:
		s.st.lapseAsk(k, seq.Seq)
	}
	v, dec := k.view(), k.decision()
	s.mu.Unlock()
	if !window { // a window is logged with the answer's collectBy, a lapse as an event
		s.logAsk("lapsed", v, "verdict", v.OnTimeout)
		s.daemon.AskDecided(dec)
	}
	return nil
}

// windowGiven applies an ask-window record, and wakes the timer.
func (st *state) windowGiven(k *ask, collectBy int64) {
	k.CollectBy = collectBy
	close(st.askSignal)
	st.askSignal = make(chan struct{})
}

// lapseAsk applies an ask-lapsed record (at seq): the ask goes to its
// on-timeout verdict at collectBy, its approver kept as its answerer.
func (st *state) lapseAsk(k *ask, seq uint64) {
	k.State, k.Verdict = msg.AskLapsed, k.OnTimeout
	st.addAskEvent(seq, views.AskLapsedEvent, k.CollectBy, k)
}

// AskWindow replays an ask-window record.
func (rp *replayer) AskWindow(r journal.Record, b *hostlog.AskWindow) error {
	k := rp.st.Asks[b.Ask]
	if k == nil {
		return fmt.Errorf("ask %s: a collect window for no live ask", b.Ask)
	}
	err := hostlog.CheckAskWindow(b, k.State, k.OnTimeout, k.CollectBy, k.AnsweredAt)
	if err == nil {
		rp.st.windowGiven(k, b.CollectBy)
	}
	return err
}

// AskLapsed replays an ask-lapsed record.
func (rp *replayer) AskLapsed(r journal.Record, b *hostlog.AskLapsed) error {
	k := rp.st.Asks[b.Ask]
	if k == nil {
		return fmt.Errorf("ask %s: a lapse of no live ask", b.Ask)
	}
	at := rp.st.Attempts[k.Attempt]
	err := hostlog.CheckAskLapse(b, k.State, k.OnTimeout, k.CollectBy, at != nil && at.State == msg.StateAwaitingApproval)
	if err == nil {
		rp.st.lapseAsk(k, r.Seq)
	}
	return err
}
