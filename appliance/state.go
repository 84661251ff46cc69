package appliance

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// The appliance's snapshots (DESIGN.md section 13, "The appliance's
// history"): what a replay of the journal up to a mark rebuilds, less
// the answers, which are in the history index.
const (
	stateFormat  = "steward-appliance-state"
	stateVersion = 1
	// maxStateBytes bounds a state's encoding: three numbers and a hash
	// take under 64 bytes, and nothing in the state grows with the calls
	// served.
	maxStateBytes = 256
	// answersBucket is the index's bucket of recorded answers: key the
	// request id's bytes (1 to 80 of A-Za-z0-9_-, checked at replay),
	// value an entry (encodeEntry).
	answersBucket = "answers"
	// originMeta is the index meta key of the journal the index was built
	// from: the SHA-256 of its bind record (record 2's prev), so that an
	// index of another journal is never taken for this one's.
	originMeta = "appliance-origin"
)

// replayState is the appliance's history.State: the replay of its
// journal. It keeps no answer: each goes into the history index
// (answersBucket), or, without an index (a full replay in memory: a
// read-only command, the tests' reference), into all.
type replayState struct {
	x   *index.Index
	all map[string]entry
	// where names the journal in refusals.
	where string
	// fault, when set, is told of an index failure (not of a record the
	// replay refuses): the server stops on it, for a restart to reopen or
	// rebuild the index.
	fault func(error)

	wire
}

// wire is the state as a snapshot holds it.
type wire struct {
	// Seq is the last record applied; Answers the answer records among
	// them; Origin the SHA-256 of the journal's bind record, once a
	// record after it was applied (Seq >= 2).
	Seq     uint64 `cbor:"seq"`
	Answers uint64 `cbor:"answers"`
	Origin  []byte `cbor:"origin,omitempty"`
}

// entry is what a repeat of a request id needs to decide: the hash of
// the canonical body first answered, to refuse another body under the
// same id, and the place of the answer record, to read it at once.
type entry struct {
	sum   [sha256.Size]byte
	place journal.Place
}

// entryVersion is the first byte of an encoded entry; entryBytes its
// length: version, SHA-256, place.
const (
	entryVersion = 1
	entryBytes   = 1 + sha256.Size + index.PlaceBytes
)

func encodeEntry(e entry) []byte {
	b := make([]byte, 0, entryBytes)
	b = append(b, entryVersion)
	b = append(b, e.sum[:]...)
	return append(b, index.EncodePlace(e.place)...)
}

func decodeEntry(b []byte) (entry, error) {
	if len(b) != entryBytes || b[0] != entryVersion {
		return entry{}, fmt.Errorf("an answer entry of %d bytes, version %d; want %d bytes, version %d", len(b), firstByte(b), entryBytes, entryVersion)
	}
	p, err := index.DecodePlace(b[1+sha256.Size:])
	if err != nil {
		return entry{}, err
	}
	return entry{sum: [sha256.Size]byte(b[1 : 1+sha256.Size]), place: p}, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

var (
	stateEncMode = func() cbor.EncMode {
		m, err := cbor.CoreDetEncOptions().EncMode()
		if err != nil {
			panic(err)
		}
		return m
	}()
	// stateDecMode reads a state from a file strictly: no duplicate or
	// unknown key, no tag, no indefinite length. Its nesting and sizes
	// are the library's smallest bounds (4 levels, 16 pairs, 16
	// elements); maxStateBytes, checked first, is the tighter one.
	stateDecMode = func() cbor.DecMode {
		m, err := cbor.DecOptions{
			DupMapKey:         cbor.DupMapKeyEnforcedAPF,
			ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
			IndefLength:       cbor.IndefLengthForbidden,
			TagsMd:            cbor.TagsForbidden,
			MaxNestedLevels:   4,
			MaxMapPairs:       16,
			MaxArrayElements:  16,
		}.DecMode()
		if err != nil {
			panic(err)
		}
		return m
	}()
)

// newReplayState is an empty state (before the journal's first record).
func newReplayState(x *index.Index, where string, fault func(error)) *replayState {
	st := &replayState{x: x, where: where, fault: fault}
	if x == nil {
		st.all = map[string]entry{}
	}
	return st
}

// Encode is the state's deterministic CBOR.
func (st *replayState) Encode() ([]byte, error) { return stateEncMode.Marshal(st.wire) }

// decodeWire reads an encoded state: at most maxStateBytes, strictly its
// deterministic encoding, and consistent (an answer per record at most,
// bar the bind record; an origin exactly when a record follows the bind
// record).
func decodeWire(b []byte) (wire, error) {
	var w wire
	if len(b) > maxStateBytes {
		return w, fmt.Errorf("appliance state: %d bytes exceeds the bound of %d", len(b), maxStateBytes)
	}
	if err := stateDecMode.Unmarshal(b, &w); err != nil {
		return w, fmt.Errorf("appliance state: %w", err)
	}
	if again, err := stateEncMode.Marshal(w); err != nil || !bytes.Equal(again, b) {
		return w, errors.New("appliance state: not in its deterministic encoding")
	}
	switch {
	case w.Seq == 0:
		return w, errors.New("appliance state: at record 0, before the journal's bind record")
	case w.Answers >= w.Seq:
		return w, fmt.Errorf("appliance state: %d answers in %d records, one of which is the bind record", w.Answers, w.Seq)
	case (w.Seq >= 2) != (w.Origin != nil) || w.Origin != nil && len(w.Origin) != sha256.Size:
		return w, fmt.Errorf("appliance state: an origin of %d bytes at record %d (32 bytes from record 2 on, none before)", len(w.Origin), w.Seq)
	}
	return w, nil
}

// decodeReplayState is a state from a snapshot: of this format and
// version, at the snapshot's mark, and of the journal the index was
// built from.
func decodeReplayState(s snapshot.Snapshot, x *index.Index, where string, fault func(error)) (*replayState, error) {
	if s.Format != stateFormat || s.Version != stateVersion {
		return nil, fmt.Errorf("appliance state: format %q version %d; this appliance reads %q version %d", s.Format, s.Version, stateFormat, stateVersion)
	}
	w, err := decodeWire(s.State)
	if err != nil {
		return nil, err
	}
	if w.Seq != s.Mark.Seq {
		return nil, fmt.Errorf("appliance state: at record %d, but its snapshot's mark is record %d", w.Seq, s.Mark.Seq)
	}
	st := newReplayState(x, where, fault)
	st.wire = w
	if x != nil && w.Origin != nil {
		o, ok, err := x.Meta(originMeta)
		switch {
		case err != nil:
			return nil, st.indexFault(err)
		case ok && !bytes.Equal(o, w.Origin):
			return nil, fmt.Errorf("appliance state: of another journal (its bind record hashes to %x, the history index's journal's to %x)", w.Origin[:8], o[:min(8, len(o))])
		}
	}
	return st, nil
}

// Apply applies the next record of the journal.
func (st *replayState) Apply(r journal.Record) error {
	if r.Seq != st.Seq+1 {
		return fmt.Errorf("journal %s: record %d follows record %d", st.where, r.Seq, st.Seq)
	}
	apply, ok := recordKinds[r.Kind]
	if !ok {
		return fmt.Errorf("journal %s: record %d has unknown kind %q", st.where, r.Seq, r.Kind)
	}
	if r.Seq == 2 {
		if err := st.setOrigin(r.Prev); err != nil {
			return err
		}
	}
	if err := apply(st, r); err != nil {
		return err
	}
	st.Seq = r.Seq
	return nil
}

// setOrigin records the journal's origin (the hash of its bind record) in
// the state and, the first time, in the index; an index that holds
// another is of another journal, and so damaged for this one.
func (st *replayState) setOrigin(prev []byte) error {
	st.Origin = bytes.Clone(prev)
	if st.x == nil {
		return nil
	}
	o, ok, err := st.x.Meta(originMeta)
	switch {
	case err != nil:
		return st.indexFault(err)
	case !ok:
		return st.indexFault(st.x.SetMeta(originMeta, prev))
	case !bytes.Equal(o, prev):
		return st.damaged("it was built from another journal (bind record hashing to %x, not %x)", o[:min(8, len(o))], prev[:8])
	}
	return nil
}

// applyAnswer puts an answer record's entry into the index (or all). The
// same request id under another record is a second answer, which the
// appliance never writes: the replay stops. Under this very record it is
// this record again (the index was synced past the snapshot replayed
// from), not a duplicate.
func (st *replayState) applyAnswer(r journal.Record) error {
	a, err := decodeAnswer(r.Body)
	if err != nil {
		return fmt.Errorf("journal %s: record %d: %w", st.where, r.Seq, err)
	}
	e := entry{sum: [sha256.Size]byte(a.BodySHA256), place: r.Place}
	old, ok, err := st.entry(a.RequestID)
	switch {
	case err != nil:
		return err
	case !ok:
		if err := st.put(a.RequestID, e); err != nil {
			return err
		}
	case old.place.Seq != r.Seq:
		return fmt.Errorf("journal %s: record %d: a second answer for requestId %q (the first is record %d)", st.where, r.Seq, a.RequestID, old.place.Seq)
	case old != e:
		return st.damaged("its entry of requestId %q names record %d with another body hash or place than the journal's", a.RequestID, r.Seq)
	}
	st.Answers++
	return nil
}

// entry is the recorded entry of request id id.
func (st *replayState) entry(id string) (entry, bool, error) {
	if st.x == nil {
		e, ok := st.all[id]
		return e, ok, nil
	}
	v, ok, err := st.x.Get(answersBucket, []byte(id))
	if err != nil || !ok {
		return entry{}, false, st.indexFault(err)
	}
	e, err := decodeEntry(v)
	if err != nil {
		return entry{}, false, st.damaged("requestId %q: %v", id, err)
	}
	return e, true, nil
}

func (st *replayState) put(id string, e entry) error {
	if st.x == nil {
		st.all[id] = e
		return nil
	}
	return st.indexFault(st.x.Put(answersBucket, []byte(id), encodeEntry(e)))
}

// indexFault reports an index failure to st.fault and returns it (nil
// for nil).
func (st *replayState) indexFault(err error) error {
	if err != nil && st.fault != nil {
		st.fault(err)
	}
	return err
}

// damaged is a *index.DamagedError of st's index, reported as a fault:
// the index disagrees with the journal, the truth.
func (st *replayState) damaged(format string, args ...any) error {
	return st.indexFault(&index.DamagedError{Path: st.x.Path(), Reason: fmt.Sprintf(format, args...)})
}

// The states are history's.
var _ history.State = (*replayState)(nil)
