package operator

import (
	"context"
	"sort"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// AskList is the first page of AskListPage: the pending asks, oldest
// first, or with all the latest ones the host holds.
func (s *Store) AskList(all bool) ([]msg.AskView, error) {
	page, _, err := s.AskListPage(all, 0)
	return page, err
}

// AskShow shows one ask, its expiry applied first.
func (s *Store) AskShow(id string) (msg.AskView, error) {
	s.expireForRead(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.st.askOf(id)
	if k == nil {
		return msg.AskView{}, lookupOr(err, &AskRefusal{Reason: "no ask " + hostlog.QuoteLine(id, 40)})
	}
	return k.view(), nil
}

// AdvisorAsks is the first page of AdvisorAsksPage.
func (s *Store) AdvisorAsks(controller, advisor string) ([]msg.AskView, error) {
	page, _, err := s.AdvisorAsksPage(controller, advisor, 0)
	return page, err
}

// AskEvents returns the ask events of the records after journal sequence
// number after, oldest first (a page: at most msg.MaxAsksListed, and at
// most msg.AsksPageBytes encoded, ask_pages.go), and the cursor
// to pass next time (the last event's seq, or after). When there are none
// it waits up to wait for one, on the signal every new event gives (no
// polling). Expiry is applied first, so an ask whose expiry passed shows
// its expired event.
func (s *Store) AskEvents(ctx context.Context, after uint64, wait time.Duration) ([]views.AskEvent, uint64, error) {
	if err := s.expireDue(""); err != nil {
		s.log.Error("steward-operator: ask expiry record", "err", err)
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		s.mu.Lock()
		out, err := s.st.pastEvents(after, msg.MaxAsksListed)
		if err != nil {
			s.mu.Unlock()
			return nil, after, err
		}
		evs, from := s.st.AskEvents, after
		if len(out) != 0 {
			from = out[len(out)-1].Seq
		}
		i := sort.Search(len(evs), func(i int) bool { return evs[i].Seq > from })
		out = append(out, evs[i:i+min(len(evs)-i, msg.MaxAsksListed-len(out))]...)
		for i := range out { // copies: the state's events stay without bodies
			if out[i].Ask.Arguments == nil {
				if k, _ := s.st.askOf(out[i].Ask.ID); k != nil {
					out[i].Ask.Arguments = k.Arguments
				}
			}
		}
		out = out[:views.FitPage(len(out), func(i int) int { return views.EncodedSize(&out[i]) })]
		if n := len(out); n > 0 {
			s.mu.Unlock()
			return out, out[n-1].Seq, nil
		}
		signal := s.st.askSignal
		s.mu.Unlock()
		if timeout == nil {
			return nil, after, nil
		}
		select {
		case <-signal:
		case <-timeout:
			return nil, after, nil
		case <-ctx.Done():
			// The host is shutting down or the watch went away: nothing
			// more is waited for.
			return nil, after, nil
		}
	}
}

// expireForRead applies expiry before a read; a failure is logged and the
// read answers what is recorded.
func (s *Store) expireForRead(id string) {
	if err := s.expireDue(id); err != nil {
		s.log.Error("steward-operator: ask expiry record", "ask", id, "err", err)
	}
}

// logAsk writes the host's one line of an ask event: "steward-operator:
// ask raised|answered|expired|answer refused" with the ask, its attempt
// and call, and args (by, verdict, reason where they apply).
func (s *Store) logAsk(event string, v msg.AskView, args ...any) {
	s.log.Info("steward-operator: ask "+event, append([]any{"ask", v.ID, "attempt", v.Attempt, "agent", v.Agent,
		"conversation", v.Conversation, "application", v.Application, "operation", v.Operation}, args...)...)
}
