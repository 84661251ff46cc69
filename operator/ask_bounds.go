package operator

import (
	"cmp"
	"slices"
	"sort"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The bounds of asks (views/askbounds.go, DESIGN.md section 5
// "Approvals"): the counts behind them, each from durable records, and
// the pages of lists, after a cursor (the journal sequence number of the
// last ask of the page before) and as many as fit (views.FitPage).

// raiseRefused is a raise a bound refused: nothing was journaled.
type raiseRefused struct{ ref *msg.Refusal }

func (e *raiseRefused) Error() string { return e.ref.Reason }

// raiseChecked makes ask k's id, checks its bounds and counts its call,
// with s.askMu held: it orders every ask record's append, so no other
// raise lands between the check and k's record. (An ask past its expiry
// holds its place only until the expiry timer decides it.)
func (s *Store) raiseChecked(k *ask) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref := s.raiseRefusal(k); ref != nil {
		return &raiseRefused{ref}
	}
	k.ID, k.State = s.st.newAskID(), msg.AskPending
	s.st.askCall(k)
	return nil
}

// raiseRefusal is why ask k may not be raised now (with s.mu held): the
// agent's calls of k.CallDay are spent, or a cap of pending asks would be
// passed. Nil when it may.
func (s *Store) raiseRefusal(k *ask) *msg.Refusal {
	key := agentKey{k.Controller, k.Agent}
	if al := s.st.limitsOf(k.Controller, k.Agent); al != nil && al.Limits.CallsPerDay != nil && k.CallDay != 0 &&
		s.st.countsOn(key, k.CallDay, "", false, 0).calls >= *al.Limits.CallsPerDay {
		return &msg.Refusal{Code: msg.CodeAgentLimit, Reason: "the daily call limit for this agent is reached: it refills at " + nextUTCDay(k.CallDay)}
	}
	pending := make([]views.PendingAsk, 0, len(s.st.asksPending))
	for _, p := range s.st.asksPending {
		pending = append(pending, views.PendingAsk{Controller: p.Controller, Agent: p.Agent, Bytes: int64(len(p.Body))})
	}
	if why := s.askBounds.Refusal(pending, k.Controller, k.Agent, int64(len(k.Body))); why != "" {
		return &msg.Refusal{Code: msg.CodeAgentLimit, Reason: why}
	}
	return nil
}

// askCall counts the call of ask k on its agent's day k.CallDay (at its
// raise, and on replay of its record); askUncall gives it back when the
// record could not be appended. An ask recorded before asks counted
// (CallDay 0) counts none.
func (st *state) askCall(k *ask) {
	if k.Agent != "" && k.CallDay != 0 {
		u := st.useOf(agentKey{k.Controller, k.Agent}, k.CallDay)
		u.roll(k.CallDay)
		u.Calls++
	}
}

func (st *state) askUncall(k *ask) {
	if u := st.AgentUse[agentKey{k.Controller, k.Agent}]; k.CallDay != 0 && u != nil && u.Day == k.CallDay && u.Calls > 0 {
		u.Calls--
	}
}

// askCounted reports whether attempt id's call was counted by its ask:
// its reservation then counts no second call, and its admission again is
// not held to the day's calls (the raise was).
func (st *state) askCounted(id string) bool {
	k := st.askByAttempt[id]
	return k != nil && k.CallDay != 0
}

// advisorDayRefusal is why no advisor may decide ask k on day (with s.mu
// held): the asking agent's answers of the day are spent; "" when not.
func (st *state) advisorDayRefusal(k *ask, day int64) string {
	var p *msg.ApprovalPolicy
	var n uint64
	if al := st.limitsOf(k.Controller, k.Agent); al != nil {
		p = al.Limits.Approval
	}
	if u := st.AgentUse[agentKey{k.Controller, k.Agent}]; u != nil && u.Day >= day {
		n = u.Advised
	}
	if bound := p.AgentAnswerDayBound(); n >= bound {
		return views.AnswersSpent(n, bound, k.Agent, nextUTCDay(day))
	}
	return ""
}

// advisorDayCount counts an advisor's decision of ask k at at (unix ms)
// on the asking agent's day, from its ask-answer record.
func (st *state) advisorDayCount(k *ask, at int64) {
	u := st.useOf(agentKey{k.Controller, k.Agent}, at/msPerDay)
	u.roll(at / msPerDay)
	u.Advised++
}

// pageAsks is the page of ks after cursor after, and the next page's
// cursor (0: this is the last).
func pageAsks(ks []*ask, after uint64) ([]msg.AskView, uint64) {
	slices.SortFunc(ks, func(a, b *ask) int { return cmp.Compare(a.Seq, b.Seq) })
	ks = ks[sort.Search(len(ks), func(i int) bool { return ks[i].Seq > after }):]
	out := make([]msg.AskView, 0, min(len(ks), msg.MaxAsksListed))
	n := views.FitPage(len(ks), func(i int) int { out = append(out, ks[i].view()); return views.EncodedSize(&out[i]) })
	if n == len(ks) {
		return out[:n], 0
	}
	return out[:n], ks[n-1].Seq
}

// AskListPage is a page of the pending asks or, with all, of the latest
// msg.MaxAsksListed asks the host holds, after cursor after (0: the
// first), and the next page's cursor (0: none). Expiry is applied first.
func (s *Store) AskListPage(all bool, after uint64) ([]msg.AskView, uint64, error) {
	s.expireForRead("")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !all {
		page, next := pageAsks(s.st.pendingAsks(func(*ask) bool { return true }), after)
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
	slices.SortStableFunc(ks, func(a, b *ask) int { return cmp.Compare(a.Seq, b.Seq) })
	page, next := pageAsks(ks[max(0, len(ks)-msg.MaxAsksListed):], after)
	return page, next, nil
}

// pendingAsks is the pending asks that keep. With s.mu held.
func (st *state) pendingAsks(keep func(*ask) bool) []*ask {
	var ks []*ask
	for _, k := range st.asksPending {
		if keep(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// AdvisorAsksPage is a page of the pending asks of controller that
// advisor may answer (whose asking agent's current limits record names it
// an advisor, never its own), after cursor after, and the next page's
// cursor. It is refused (an *AskRefusal, code msg.CodeApprovals) when no
// limits record of the controller names the agent an advisor.
func (s *Store) AdvisorAsksPage(controller, advisor string, after uint64) ([]msg.AskView, uint64, error) {
	s.expireForRead("")
	s.mu.Lock()
	defer s.mu.Unlock()
	mayAdvise := func(k agentKey) bool {
		al := s.st.limitsOf(k.Controller, k.Agent)
		return k.Controller == controller && k.Agent != advisor && al != nil && al.Limits.Approval.MayAdvise(advisor)
	}
	if !slices.ContainsFunc(s.st.AgentOrder, mayAdvise) {
		return nil, 0, &AskRefusal{Reason: "agent " + hostlog.QuoteLine(advisor, 40) + " is not an advisor of any agent's asks"}
	}
	page, next := pageAsks(s.st.pendingAsks(func(k *ask) bool { return mayAdvise(agentKey{k.Controller, k.Agent}) }), after)
	return page, next, nil
}
