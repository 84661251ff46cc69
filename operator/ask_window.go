package operator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Collect windows (DESIGN.md section 5, "Approvals"). An approval is
// taken to mean "go on now", not "whenever": an approved ask whose
// attempt is not collected within its collect window lapses to its
// on-timeout verdict (an ask-lapsed record, like ask-expired), and a
// lapsed ask's collect is refused as denied, which then sticks as any
// denial. The window is the ask's expiry duration (expiresAt - raisedAt,
// the policy's expiry when it was raised) counted from the approval, and
// the ask-answer record carries its end (collectBy).
//
// The window exists only for an ask whose on-timeout verdict is deny. One
// whose verdict is approve would lapse to approve: its call may go on
// with no human's word at all once it expires, so an approval collected
// late grants nothing an unanswered ask would not, and such an approval
// has no window (no collectBy, no lapse).
//
// An ask approved before windows (its ask-answer has no collectBy),
// uncollected, gets its window when an upgraded host that may write first
// reads it (the timer at start, or any read): an ask-window record
// {collectBy = now + the expiry duration} makes that instant durable, so
// a replay and a snapshot give the same window, and only then can it
// lapse. A store opened read-only journals nothing and shows the asks as
// recorded.

// collectByAt is the end of the collect window of an answer of verdict v
// at at (unix ms): 0 when the answer opens none (a denial, or an ask that
// expires to approve).
func (k *ask) collectByAt(at int64, v msg.Verdict) int64 {
	if v != msg.VerdictApprove || k.OnTimeout != msg.VerdictDeny {
		return 0
	}
	return at + k.ExpiresAt - k.RaisedAt
}

// windowWork is what an approved ask's window needs at now.
type windowWork int

const (
	windowNone   windowWork = iota
	windowLegacy            // approved before windows: give it one
	windowLapse             // past its window, uncollected: lapse it
)

// windowOpen reports whether approved ask k has a window to watch (with
// s.mu held): its on-timeout verdict is deny, its attempt still awaits
// approval, unclaimed, and no record of it is on its way.
func (st *state) windowOpen(k *ask) bool {
	if k.State != msg.AskApproved || k.answering || k.OnTimeout != msg.VerdictDeny {
		return false
	}
	at := st.Attempts[k.Attempt]
	return at != nil && at.Ask == k.ID && at.State == msg.StateAwaitingApproval && !at.collecting
}

// windowDue is what k's window needs at now (with s.mu held).
func (st *state) windowDue(k *ask, now int64) windowWork {
	switch {
	case !st.windowOpen(k):
		return windowNone
	case k.CollectBy == 0:
		return windowLegacy
	case now >= k.CollectBy:
		return windowLapse
	}
	return windowNone
}

// nextWindow is the earliest instant an approved ask's window needs work
// (now for one approved before windows), with s.mu held.
func (st *state) nextWindow(now int64) (int64, bool) {
	var next int64
	for _, k := range st.Asks {
		if !st.windowOpen(k) {
			continue
		}
		t := k.CollectBy
		if t == 0 {
			t = now
		}
		if next == 0 || t < next {
			next = t
		}
	}
	return next, next != 0
}

// windowsDueLocked gives the asks approved before windows theirs and
// lapses those past it (only ask id when id is not empty), with s.askMu
// held: what expireDueLocked does after the expiries.
func (s *Store) windowsDueLocked(id string) error {
	s.mu.Lock()
	now := s.clockLocked().UnixMilli()
	var due []*ask
	if id != "" {
		if k := s.st.Asks[id]; k != nil && s.st.windowDue(k, now) != windowNone {
			due = append(due, k)
		}
	} else {
		for _, k := range s.st.Asks {
			if s.st.windowDue(k, now) != windowNone {
				due = append(due, k)
			}
		}
		slices.SortFunc(due, func(a, b *ask) int { return strings.Compare(a.ID, b.ID) })
	}
	s.mu.Unlock()
	for _, k := range due {
		if err := s.windowStep(k); err != nil {
			return err
		}
	}
	return nil
}

// windowStep journals what ask k's window needs now, checked again and
// claimed (answering) under s.mu so that no collect claims the attempt
// meanwhile, and applies it. Called with s.askMu held.
func (s *Store) windowStep(k *ask) error {
	s.mu.Lock()
	now := s.clockLocked().UnixMilli()
	work := s.st.windowDue(k, now)
	if work == windowNone {
		s.mu.Unlock()
		return nil
	}
	k.answering = true
	kind, rec := hostlog.KindAskLapsed, any(hostlog.AskLapsed{Ask: k.ID, Verdict: k.OnTimeout, At: k.CollectBy})
	if work == windowLegacy {
		kind, rec = hostlog.KindAskWindow, hostlog.AskWindow{Ask: k.ID, CollectBy: now + k.ExpiresAt - k.RaisedAt}
	}
	s.mu.Unlock()
	seq, err := s.append(kind, rec)
	s.mu.Lock()
	k.answering = false
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("ask %s: the host could not journal its collect window: %w", k.ID, err)
	}
	if w, ok := rec.(hostlog.AskWindow); ok {
		s.st.windowGiven(k, w.CollectBy)
		v := k.view()
		s.mu.Unlock()
		s.logAsk("collect window", v, "collectBy", time.UnixMilli(w.CollectBy).UTC().Format(time.RFC3339))
		return nil
	}
	s.st.lapseAsk(k, seq.Seq)
	v, dec := k.view(), k.decision()
	s.mu.Unlock()
	s.logAsk("lapsed", v, "verdict", k.OnTimeout)
	s.daemon.AskDecided(dec)
	return nil
}

// windowGiven applies an ask-window record: the ask's window, and a wake
// for the timer, whose next instant changed.
func (st *state) windowGiven(k *ask, collectBy int64) {
	k.CollectBy = collectBy
	close(st.askSignal)
	st.askSignal = make(chan struct{})
}

// lapseAsk applies an ask-lapsed record (at seq): the ask goes to its
// on-timeout verdict at its collectBy; who approved it stays its
// answerer, and its event says it lapsed.
func (st *state) lapseAsk(k *ask, seq uint64) {
	k.State, k.Verdict = msg.AskLapsed, k.OnTimeout
	st.addAskEvent(seq, views.AskLapsedEvent, k.CollectBy, k)
}

// AskWindow replays an ask-window record: only an ask approved without a
// window whose on-timeout verdict is deny gets one, after its approval.
func (rp *replayer) AskWindow(r journal.Record, b *hostlog.AskWindow) error {
	k := rp.st.Asks[b.Ask]
	switch {
	case k == nil:
		return fmt.Errorf("ask %s: a collect window for no live ask", b.Ask)
	case k.State != msg.AskApproved || k.OnTimeout != msg.VerdictDeny:
		return fmt.Errorf("ask %s: a collect window for an ask %s (on timeout %s)", b.Ask, k.State, k.OnTimeout)
	case k.CollectBy != 0:
		return fmt.Errorf("ask %s: a second collect window", b.Ask)
	case b.CollectBy <= k.AnsweredAt:
		return fmt.Errorf("ask %s: a collect window ending at %d, not after its approval at %d", b.Ask, b.CollectBy, k.AnsweredAt)
	}
	rp.st.windowGiven(k, b.CollectBy)
	return nil
}

// AskLapsed replays an ask-lapsed record: an approved ask, its attempt
// still awaiting approval, past its window, to its on-timeout verdict.
func (rp *replayer) AskLapsed(r journal.Record, b *hostlog.AskLapsed) error {
	k := rp.st.Asks[b.Ask]
	switch {
	case k == nil:
		return fmt.Errorf("ask %s: a lapse of no live ask", b.Ask)
	case k.State != msg.AskApproved || k.CollectBy == 0:
		return fmt.Errorf("ask %s: a lapse of an ask %s with no collect window", b.Ask, k.State)
	case b.At != k.CollectBy || b.Verdict != k.OnTimeout:
		return fmt.Errorf("ask %s: a lapse at %d to %s, not at its window's end %d to its on-timeout verdict %s", b.Ask, b.At, b.Verdict, k.CollectBy, k.OnTimeout)
	}
	if at := rp.st.Attempts[k.Attempt]; at == nil || at.State != msg.StateAwaitingApproval {
		return fmt.Errorf("ask %s: a lapse after its attempt %s went on", b.Ask, k.Attempt)
	}
	rp.st.lapseAsk(k, r.Seq)
	return nil
}

// lapsedReasons are a lapsed ask's receipt reason and the agent's.
func lapsedReasons(k *ask) (receipt, agent string) {
	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
	receipt = fmt.Sprintf("approved by %s at %s, not collected within its window: lapsed at %s to deny", k.AnsweredBy, at(k.AnsweredAt), at(k.CollectBy))
	agent = fmt.Sprintf("the call's approval (ask %s, by %s) lapsed uncollected at %s to its on-timeout verdict deny", k.ID, k.AnsweredBy, at(k.CollectBy))
	return receipt, agent + nothingReservedSentOrCharged
}
