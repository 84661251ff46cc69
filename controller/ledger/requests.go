package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// This file is the requestIds that ended, in the history index (DESIGN.md
// section 13): what a later call with the same agent, application and
// requestId needs to be decided (Begin), stored under a key of the three,
// with the place of the answer record, so that a replay reads that record
// at once (journal.ReadAt) however old it is.

// Index is the part of the history index (journal/index.Index) the ledger
// uses. It is an interface so that this package, which the root installer
// links, does not link the index's database: the installer reads the
// ledger without an index.
type Index interface {
	// Get returns key's value in bucket and whether it is there.
	Get(bucket string, key []byte) ([]byte, bool, error)
	// Put sets key to value in bucket, visible to Get at once.
	Put(bucket string, key, value []byte) error
}

// Discard is the index of a ledger opened only to be read (the read-only
// commands, the installer): it keeps none of the requestIds that ended,
// so that reading a journal of a million calls holds no more than what
// is under way, and it decides no call (Begin and Decided refuse with
// ErrReadOnlyLedger, never "not found").
func Discard() Index { return discard{} }

// ErrReadOnlyLedger is the error of a lookup in Discard.
var ErrReadOnlyLedger = errors.New("ledger: opened to be read; it keeps no requestId that ended and decides no call")

type discard struct{}

func (discard) Put(string, []byte, []byte) error         { return nil }
func (discard) Get(string, []byte) ([]byte, bool, error) { return nil, false, ErrReadOnlyLedger }

// RequestsBucket is the index bucket of the requestIds that ended.
const RequestsBucket = "controller-requests"

// requestKeyVersion is the first byte of a request key: a change of the
// key's form is a new version (and an index rebuilt from the journal).
const requestKeyVersion = 1

// RequestKey is the index key of agent's requestId of application: a
// version byte, then each of the three as a uvarint length and its bytes,
// so that no two triples share a key (no separator can be confused with a
// byte of a name).
func RequestKey(agent, application, requestID string) []byte {
	b := make([]byte, 0, 1+3*binary.MaxVarintLen16+len(agent)+len(application)+len(requestID))
	b = append(b, requestKeyVersion)
	for _, s := range []string{agent, application, requestID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func (k reqKey) bytes() []byte { return RequestKey(k.agent, k.application, k.requestID) }

// reqValue is a request entry as the index holds it: a CBOR array (no
// field names: the index holds one per requestId ever answered), decoded
// strictly (its length and every field's type).
type reqValue struct {
	_          struct{} `cbor:",toarray"`
	Attempt    string
	SHA256     []byte
	Path       string
	Route      string
	Unscoped   bool
	State      msg.State
	Ask        string
	ByOperator bool
	// Answer is the answer record's place, nil when it has none (an
	// attempt that ended without reaching the application); EndSeq the
	// record that ended the attempt.
	Answer *placeValue
	EndSeq uint64
}

// placeValue is a journal.Place as an array.
type placeValue struct {
	_       struct{} `cbor:",toarray"`
	Seq     uint64
	Segment uint64
	Offset  int64
}

// encodeReq is q's index value.
func encodeReq(q *reqEntry) ([]byte, error) {
	v := reqValue{Attempt: q.attempt, SHA256: q.sha[:], Path: q.path, Route: q.route, Unscoped: q.unscoped,
		State: q.state, Ask: q.ask, ByOperator: q.byOperator, EndSeq: q.endSeq}
	if q.answer != (journal.Place{}) {
		v.Answer = &placeValue{Seq: q.answer.Seq, Segment: q.answer.Segment, Offset: q.answer.Offset}
	}
	return wire.Marshal(v)
}

// decodeReq decodes an index value, refusing one no ended attempt has.
func decodeReq(b []byte) (*reqEntry, error) {
	var v reqValue
	if err := wire.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if len(v.SHA256) != 32 {
		return nil, fmt.Errorf("a request hash of %d bytes, not 32", len(v.SHA256))
	}
	if v.EndSeq == 0 || v.State == msg.StateUncertain || v.State == msg.StatePending || v.State == msg.StateAwaitingApproval {
		return nil, fmt.Errorf("an entry of attempt %s in state %q, ended at record %d: not an ended attempt", v.Attempt, v.State, v.EndSeq)
	}
	// A refused entry with an answer is a denial (denial.go): no other
	// refusal keeps its record's place.
	q := &reqEntry{attempt: v.Attempt, path: v.Path, route: v.Route, unscoped: v.Unscoped, state: v.State, ask: v.Ask,
		byOperator: v.ByOperator, endSeq: v.EndSeq, denied: v.State == msg.StateRefused && v.Answer != nil}
	copy(q.sha[:], v.SHA256)
	if v.Answer != nil {
		q.answer = journal.Place{Seq: v.Answer.Seq, Segment: v.Answer.Segment, Offset: v.Answer.Offset}
		if q.answer.Seq == 0 || q.answer.Seq > v.EndSeq {
			return nil, fmt.Errorf("an answer at record %d for an attempt ended at record %d", q.answer.Seq, v.EndSeq)
		}
	}
	return q, nil
}

// putReq puts the entry of an attempt that ended into the index; l.mu is
// held. Putting the entry of a record the index already holds it from
// (after a crash, the replay from an older snapshot meets what the index
// was fed past it) writes the same bytes again: the same item, not a
// duplicate.
func (l *Ledger) putReq(k reqKey, q *reqEntry) error {
	v, err := encodeReq(q)
	if err != nil {
		return fmt.Errorf("ledger: encoding the entry of attempt %s: %w", q.attempt, err)
	}
	if err := l.idx.Put(RequestsBucket, k.bytes(), v); err != nil {
		return fmt.Errorf("ledger: putting requestId %q of attempt %s into the history index: %w", k.requestID, q.attempt, err)
	}
	return nil
}

// lookup finds the latest attempt of k: in memory (live, or ended since
// the last Forget), else in the index. l.mu is held.
func (l *Ledger) lookup(k reqKey) (*reqEntry, error) {
	if q := l.byReq[k]; q != nil || l.idx == nil {
		return q, nil
	}
	b, ok, err := l.idx.Get(RequestsBucket, k.bytes())
	if err != nil {
		return nil, fmt.Errorf("ledger: reading requestId %q from the history index: %w", k.requestID, err)
	}
	if !ok {
		return nil, nil
	}
	q, err := decodeReq(b)
	if err != nil {
		return nil, fmt.Errorf("ledger: the history index's entry of requestId %q: %w", k.requestID, err)
	}
	return q, nil
}

// Forget drops from memory the requestIds whose attempt ended at or
// before record seq: the keeper's snapshot at that mark synced the index
// with them (history.Keeper.Run's callback). Without an index it drops
// nothing: memory is the only index then. It returns how many it dropped.
func (l *Ledger) Forget(seq uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idx == nil {
		return 0
	}
	n := 0
	for k, q := range l.byReq {
		if q.endSeq != 0 && q.endSeq <= seq {
			delete(l.byReq, k)
			n++
		}
	}
	return n
}

// Sizes reports how many attempts are open and how many requestIds are in
// memory: what the live ledger weighs.
func (l *Ledger) Sizes() (open, requests int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open), len(l.byReq)
}
