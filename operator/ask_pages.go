package operator

import (
	"slices"
	"sort"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Pages of asks (DESIGN.md section 8): a list, an advisor's list and an
// event batch each answer at most msg.MaxAsksListed items and at most
// msg.AsksPageBytes of them encoded, in journal order after a cursor (the
// journal sequence number of the last item of the page before), and say
// where the next page starts. An ask carries a call's arguments (up to an
// invocation body's 64 KiB), so a count alone would not keep a reply
// inside its frame; by bytes, every reply fits with room to spare, and
// one big ask is a page of its own, never a broken reply.

// fitPage is how many of the first items of n fit a page: at most
// msg.MaxAsksListed, their encoded sizes (size(i)) together at most
// msg.AsksPageBytes, and always the first one (which fits alone: an ask's
// body and every other field of it are bounded).
func fitPage(n int, size func(i int) int) int {
	total := 0
	for i := range min(n, msg.MaxAsksListed) {
		total += size(i)
		if i > 0 && total > msg.AsksPageBytes {
			return i
		}
	}
	return min(n, msg.MaxAsksListed)
}

// encodedSize is v's size as a reply encodes it.
func encodedSize(v any) int {
	b, err := wire.Marshal(v)
	if err != nil {
		return msg.AsksPageBytes // never: the views are plain data
	}
	return len(b)
}

// pageAsks is the page of ks (oldest first by journal order) after
// cursor after: their views, and the cursor of the next page (0: this is
// the last one).
func pageAsks(ks []*ask, after uint64) ([]msg.AskView, uint64) {
	slices.SortFunc(ks, func(a, b *ask) int { return cmpSeq(a.Seq, b.Seq) })
	i := sort.Search(len(ks), func(i int) bool { return ks[i].Seq > after })
	ks = ks[i:]
	views := make([]msg.AskView, 0, min(len(ks), msg.MaxAsksListed))
	n := fitPage(len(ks), func(i int) int {
		views = append(views, ks[i].view())
		return encodedSize(&views[i])
	})
	views = views[:n]
	if n == len(ks) {
		return views, 0
	}
	return views, ks[n-1].Seq
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AskListPage is a page of the pending asks, oldest first, or with all of
// the latest msg.MaxAsksListed asks the host holds (answered and expired
// ones too), after cursor after (0: the first page); next is the cursor
// of the page that follows, 0 when this is the last. Expiry is applied
// first.
func (s *Store) AskListPage(all bool, after uint64) (page []msg.AskView, next uint64, err error) {
	s.expireForRead("")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !all {
		page, next = pageAsks(s.st.pendingAsks(func(*ask) bool { return true }), after)
		return page, next, nil
	}
	ks, err := s.st.pastAsks(msg.MaxAsksListed)
	if err != nil {
		return nil, 0, err
	}
	ks = slices.DeleteFunc(ks, func(k *ask) bool { return s.st.Asks[k.ID] != nil })
	for _, id := range s.st.AskOrder {
		ks = append(ks, s.st.Asks[id])
	}
	slices.SortStableFunc(ks, func(a, b *ask) int { return cmpSeq(a.Seq, b.Seq) })
	page, next = pageAsks(ks[max(0, len(ks)-msg.MaxAsksListed):], after)
	return page, next, nil
}

// pendingAsks is the pending asks that keep, in no order. With s.mu held.
func (st *state) pendingAsks(keep func(*ask) bool) []*ask {
	ks := make([]*ask, 0, len(st.asksPending))
	for _, k := range st.asksPending {
		if keep(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// AdvisorAsksPage is a page of the pending asks of controller that
// advisor may answer (those whose asking agent's current limits record
// names it an advisor, never its own), oldest first, after cursor after;
// next is the next page's cursor, 0 when this is the last. It is refused
// (an *AskRefusal, code msg.CodeApprovals) when no limits record of the
// controller names the agent an advisor.
func (s *Store) AdvisorAsksPage(controller, advisor string, after uint64) ([]msg.AskView, uint64, error) {
	s.expireForRead("")
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	mayAdvise := func(k agentKey) bool {
		al := st.Agents[k]
		return k.Controller == controller && k.Agent != advisor && al != nil && al.Limits.Approval.MayAdvise(advisor)
	}
	named := false
	for _, k := range st.AgentOrder {
		named = named || mayAdvise(k)
	}
	if !named {
		return nil, 0, &AskRefusal{Reason: "agent " + hostlog.QuoteLine(advisor, 40) + " is not an advisor of any agent's asks"}
	}
	page, next := pageAsks(st.pendingAsks(func(k *ask) bool { return mayAdvise(agentKey{k.Controller, k.Agent}) }), after)
	return page, next, nil
}
