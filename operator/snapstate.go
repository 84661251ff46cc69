package operator

import (
	"fmt"

	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The state as a snapshot holds it (DESIGN.md section 13). The state's
// exported fields are its durable content, each named in the encoding by
// its Go name; its unexported fields are derived from them (parsed keys,
// the forward-socket index, the asks by attempt and pending) or live only
// in memory (the clock's going back, rate buckets, claims and flags of
// what is under way, the ask signal), and a full replay sets none of the
// latter. So the encoding of a replayed state, decoded and rebuilt, is
// that state again (TestSnapshotIsReplay holds the two together).

// encodeState is st as a snapshot holds it (deterministic CBOR).
func encodeState(st *state) ([]byte, error) { return wire.Marshal(st) }

// decodeState rebuilds a state from its snapshot encoding: the durable
// fields decoded strictly, the derived ones made from them.
func decodeState(b []byte) (*state, error) {
	st := newState()
	if err := hosthist.Decode(b, st); err != nil {
		return nil, fmt.Errorf("host state: %w", err)
	}
	if err := st.rebuild(); err != nil {
		return nil, fmt.Errorf("host state: %w", err)
	}
	return st, nil
}

// rebuild makes the derived fields of a decoded state: each controller's
// parsed keys, the forward sockets of the routes not removed, the asks by
// attempt and the pending ones, and empty maps where the encoding had
// none.
func (st *state) rebuild() error {
	fresh := newState()
	if st.Pending == nil {
		st.Pending = fresh.Pending
	}
	if st.AdvisorAnswers == nil {
		st.AdvisorAnswers = fresh.AdvisorAnswers
	}
	if st.Forgotten == nil {
		st.Forgotten = fresh.Forgotten
	}
	for name, c := range st.Controllers {
		if err := c.parseKeys(); err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
	}
	if err := st.Table.Rebuild(); err != nil {
		return err
	}
	st.askByAttempt, st.asksPending, st.askSignal = map[string]*ask{}, map[string]*ask{}, make(chan struct{})
	for id, k := range st.Asks {
		st.askByAttempt[k.Attempt] = k
		if k.State == msg.AskPending {
			st.asksPending[id] = k
		}
	}
	return nil
}
