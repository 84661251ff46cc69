package hosthist

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/wire"
)

// The buckets of the host's history index.
const (
	bucketAttempts     = "attempts"      // attempt id -> the attempt, ended
	bucketAttemptOrder = "attempt-order" // SeqKey(its first record) -> attempt id
	bucketAsks         = "asks"          // ask id -> the ask, decided, its attempt ended
	bucketAskOrder     = "ask-order"     // SeqKey(its ask record) -> ask id
	bucketAskEvents    = "ask-events"    // SeqKey(the event's record) -> the event
)

// ErrHeld is a look-up of the history of a store opened read-only while
// the host runs: the host holds the index, and answers through its admin
// socket.
var ErrHeld = errors.New("the running host holds the history index; ask it (its admin socket)")

// Index is the host's history index. A nil *Index is a store without
// one (read-only, the host stopped and the index absent): it holds
// nothing and takes nothing.
type Index struct {
	x        *index.Index // nil when held
	readOnly bool         // opened read-only, or held: Takes is false
}

// Takes reports whether what ends is put into the index (and leaves the
// state): not for a store opened read-only, whose state keeps what its
// replay saw end.
func (h *Index) Takes() bool { return h != nil && !h.readOnly }

// Attempt decodes ended attempt id into v; false if the index does not
// hold it.
func (h *Index) Attempt(id string, v any) (bool, error) { return h.get(bucketAttempts, id, v) }

// Ask decodes decided ask id into v; false if the index does not hold it.
func (h *Index) Ask(id string, v any) (bool, error) { return h.get(bucketAsks, id, v) }

// PutAttempt puts ended attempt v, id, first recorded at seq first.
func (h *Index) PutAttempt(id string, first uint64, v any) error {
	return h.put(bucketAttempts, id, v, bucketAttemptOrder, first)
}

// PutAsk puts decided ask v, id, raised by record seq.
func (h *Index) PutAsk(id string, seq uint64, v any) error {
	return h.put(bucketAsks, id, v, bucketAskOrder, seq)
}

// PutEvent puts ask event v of record seq.
func (h *Index) PutEvent(seq uint64, v any) error {
	return h.put(bucketAskEvents, string(index.SeqKey(seq)), v, "", 0)
}

// LatestAttempts decodes the latest n attempts (by first record), oldest
// first, each into the value next returns.
func (h *Index) LatestAttempts(n int, next func() any) error {
	return h.latest(bucketAttemptOrder, bucketAttempts, n, next)
}

// LatestAsks decodes the latest n asks (by ask record), oldest first.
func (h *Index) LatestAsks(n int, next func() any) error {
	return h.latest(bucketAskOrder, bucketAsks, n, next)
}

// Events decodes the ask events of the records after seq after, oldest
// first, at most n, each into the value next returns.
func (h *Index) Events(after uint64, n int, next func() any) error {
	if h == nil || n <= 0 {
		return nil
	}
	if h.x == nil {
		return ErrHeld
	}
	seen := 0
	err := h.x.Range(bucketAskEvents, index.SeqKey(after+1), func(_, v []byte) error {
		if err := Decode(v, next()); err != nil {
			return fmt.Errorf("history index: an ask event: %w", err)
		}
		if seen++; seen == n {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return indexError(err)
}

var errEnough = errors.New("enough")

func (h *Index) get(bucket, key string, v any) (bool, error) {
	if h == nil {
		return false, nil
	}
	if h.x == nil {
		return false, ErrHeld
	}
	b, ok, err := h.x.Get(bucket, []byte(key))
	if err != nil || !ok {
		return false, indexError(err)
	}
	if err := Decode(b, v); err != nil {
		return false, fmt.Errorf("history index: %s %q: %w", bucket, key, err)
	}
	return true, nil
}

func (h *Index) put(bucket, key string, v any, order string, seq uint64) error {
	if h == nil {
		return nil
	}
	if h.x == nil {
		return ErrHeld
	}
	b, err := wire.Marshal(v)
	if err == nil {
		err = h.x.Put(bucket, []byte(key), b)
	}
	if err == nil && order != "" {
		err = h.x.Put(order, index.SeqKey(seq), []byte(key))
	}
	return indexError(err)
}

func (h *Index) latest(order, bucket string, n int, next func() any) error {
	if h == nil {
		return nil
	}
	if h.x == nil {
		return ErrHeld
	}
	ids, err := h.x.Last(order, n)
	if err != nil {
		return indexError(err)
	}
	for _, e := range slices.Backward(ids) { // Last is greatest first
		ok, err := h.get(bucket, string(e.Value), next())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("history index: %s names %s %q, which it does not hold", order, bucket, e.Value)
		}
	}
	return nil
}

func indexError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("history index: %w", err)
}
