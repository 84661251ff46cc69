package operator

import (
	"errors"
	"slices"

	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The host's history (DESIGN.md section 13; the index is package
// operator/hosthist's). What has ended leaves the state for the history
// index: an attempt once it has ended (its record with a receipt is in the
// journal), its ask with it once decided, and every ask event. A replay
// (at open, and the keeper's replica while the host runs) puts each into
// the index as it ends and drops it (sweep); the live state keeps what
// ends until the keeper's next snapshot, then drops what that snapshot
// covers (forget), which the replica has put into the index and synced by
// then. Every read of an attempt or an ask by id, and every listing, looks
// in the state and then in the index. A store opened read-only puts
// nothing into the index: its state keeps what its replay saw end.

// ended reports whether a has ended: nothing more is recorded of it.
func (a *attempt) ended() bool {
	switch a.State {
	case msg.StateDefinite, msg.StateNotSent, msg.StateRefused, msg.StateReleased, msg.StatePerformed:
		return true
	}
	return false
}

// attemptOf is attempt id, the live one or the ended one the index holds
// (a copy: changing it changes nothing), or nil.
func (st *state) attemptOf(id string) (*attempt, error) {
	if a := st.Attempts[id]; a != nil {
		return a, nil
	}
	a := new(attempt)
	if ok, err := st.hist.Attempt(id, a); !ok {
		return nil, err
	}
	return a, nil
}

// askOf is ask id, the live one or the decided one the index holds (a
// copy), or nil.
func (st *state) askOf(id string) (*ask, error) {
	if k := st.Asks[id]; k != nil {
		return k, nil
	}
	k := new(ask)
	if ok, err := st.hist.Ask(id, k); !ok {
		return nil, err
	}
	return k, nil
}

// seenBefore reports whether replay meets attempt id a second time at
// record seq: it is live already, or the index holds it from another
// record than seq (from this very record, it is this record replayed
// again after a crash left the index ahead of the snapshot: package
// journal/history). A store opened read-only while the host runs cannot
// look into the index (hosthist.ErrHeld): the host checked its records.
func (st *state) seenBefore(id string, seq uint64) (bool, error) {
	if _, ok := st.Attempts[id]; ok {
		return true, nil
	}
	a, err := st.attemptOf(id)
	return a != nil && a.First != seq, unlessHeld(err)
}

// askSeenBefore is seenBefore for ask id, raised at record seq.
func (st *state) askSeenBefore(id string, seq uint64) (bool, error) {
	k, err := st.askOf(id)
	return k != nil && k.Seq != seq, unlessHeld(err)
}

func unlessHeld(err error) error {
	if errors.Is(err, hosthist.ErrHeld) {
		return nil
	}
	return err
}

// lookupOr is err, an index look-up's failure, else refusal.
func lookupOr(err, refusal error) error {
	if err != nil {
		return err
	}
	return refusal
}

// sweep puts attempt a, which has ended, into the index and drops it,
// with its ask when that is decided: a replay's step after an end record.
func (st *state) sweep(a *attempt) error {
	if !st.hist.Takes() || !a.ended() {
		return nil
	}
	if err := st.hist.PutAttempt(a.ID, a.First, a); err != nil {
		return err
	}
	delete(st.Attempts, a.ID)
	st.Forgotten[a.State]++
	if k := st.askByAttempt[a.ID]; k != nil && k.State != msg.AskPending {
		if err := st.hist.PutAsk(k.ID, k.Seq, k); err != nil {
			return err
		}
		st.dropAsk(k)
	}
	return nil
}

// sweepEvents puts the ask events into the index and drops them: a
// replay's step after an ask record.
func (st *state) sweepEvents() error {
	if !st.hist.Takes() {
		return nil
	}
	for i := range st.AskEvents {
		if err := st.hist.PutEvent(st.AskEvents[i].Seq, &st.AskEvents[i]); err != nil {
			return err
		}
	}
	st.AskEvents = st.AskEvents[:0]
	return nil
}

// dropAsk removes a decided ask from memory.
func (st *state) dropAsk(k *ask) {
	delete(st.Asks, k.ID)
	delete(st.askByAttempt, k.Attempt)
	st.AskOrder = slices.DeleteFunc(st.AskOrder, func(id string) bool { return id == k.ID })
}

// forget drops from the live state what ended at or before record seq,
// which a snapshot at seq covers and the index holds, synced: the
// attempts that ended (but one whose resolution's command is still under
// way: it reads the attempt once more), their decided asks and the ask
// events. A collect's claim (collecting) outlives the attempt's end on
// the approved path, and holds nothing once it has ended. s.mu is held.
func (st *state) forget(seq uint64) {
	if !st.hist.Takes() {
		return
	}
	for id, a := range st.Attempts {
		if !a.ended() || a.EndAt.Seq == 0 || a.EndAt.Seq > seq || a.resolving {
			continue
		}
		delete(st.Attempts, id)
		st.Forgotten[a.State]++
		if k := st.askByAttempt[id]; k != nil && k.State != msg.AskPending {
			st.dropAsk(k)
		}
	}
	i := 0
	for i < len(st.AskEvents) && st.AskEvents[i].Seq <= seq {
		i++
	}
	st.AskEvents = slices.Delete(st.AskEvents, 0, i)
}

// pastAttempts is the latest n attempts of the index, by First.
func (st *state) pastAttempts(n int) ([]*attempt, error) {
	var out []*attempt
	err := st.hist.LatestAttempts(n, func() any { a := new(attempt); out = append(out, a); return a })
	return out, err
}

// pastAsks is the latest n asks of the index, by Seq.
func (st *state) pastAsks(n int) ([]*ask, error) {
	var out []*ask
	err := st.hist.LatestAsks(n, func() any { k := new(ask); out = append(out, k); return k })
	return out, err
}

// pastEvents is the ask events of the index after seq after, oldest
// first, at most n.
func (st *state) pastEvents(after uint64, n int) ([]views.AskEvent, error) {
	var out []views.AskEvent
	err := st.hist.Events(after, n, func() any { out = append(out, views.AskEvent{}); return &out[len(out)-1] })
	return out, err
}
