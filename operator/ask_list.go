package operator

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// AskList lists the pending asks, oldest first, or with all every ask;
// at most msg.MaxAsksListed (all: the latest ones). Expiry is applied
// first.
func (s *Store) AskList(all bool) ([]msg.AskView, error) {
	s.expireForRead("")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !all {
		return s.st.pendingViews(func(*ask) bool { return true }), nil
	}
	ks, err := s.st.pastAsks(msg.MaxAsksListed)
	if err != nil {
		return nil, err
	}
	ks = slices.DeleteFunc(ks, func(k *ask) bool { return s.st.Asks[k.ID] != nil })
	for _, id := range s.st.AskOrder {
		ks = append(ks, s.st.Asks[id])
	}
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].Seq < ks[j].Seq })
	out := make([]msg.AskView, 0, min(len(ks), msg.MaxAsksListed))
	for _, k := range ks[max(0, len(ks)-msg.MaxAsksListed):] {
		out = append(out, k.view())
	}
	return out, nil
}

// pendingViews is the pending asks that keep, oldest first, at most
// msg.MaxAsksListed. With s.mu held.
func (st *state) pendingViews(keep func(*ask) bool) []msg.AskView {
	ks := make([]*ask, 0, len(st.asksPending))
	for _, k := range st.asksPending {
		if keep(k) {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].RaisedAt != ks[j].RaisedAt {
			return ks[i].RaisedAt < ks[j].RaisedAt
		}
		return ks[i].ID < ks[j].ID
	})
	out := make([]msg.AskView, 0, min(len(ks), msg.MaxAsksListed))
	for _, k := range ks[:min(len(ks), msg.MaxAsksListed)] {
		out = append(out, k.view())
	}
	return out
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

// AdvisorAsks lists the pending asks of controller that advisor may
// answer: those whose asking agent's current limits record names it an
// advisor, never its own. It is refused (an *AskRefusal, code
// msg.CodeApprovals) when no limits record of the controller names the
// agent an advisor.
func (s *Store) AdvisorAsks(controller, advisor string) ([]msg.AskView, error) {
	s.expireForRead("")
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	mayAdvise := func(k agentKey) bool {
		al := st.limitsOf(k.Controller, k.Agent)
		return k.Controller == controller && k.Agent != advisor && al != nil && al.Limits.Approval.MayAdvise(advisor)
	}
	named := false
	for _, k := range st.AgentOrder {
		named = named || mayAdvise(k)
	}
	if !named {
		return nil, &AskRefusal{Reason: "agent " + hostlog.QuoteLine(advisor, 40) + " is not an advisor of any agent's asks"}
	}
	return st.pendingViews(func(k *ask) bool { return mayAdvise(agentKey{k.Controller, k.Agent}) }), nil
}

// AskEvents returns the ask events of the records after journal sequence
// number after, oldest first (at most msg.MaxAsksListed), and the cursor
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
