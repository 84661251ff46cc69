package index

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Put sets key to value in bucket. It is held in memory, visible to Get,
// Last and Range at once, and written by the next Flush (or Sync, or
// Close). A Put that would take the pending set past MaxPendingEntries
// or MaxPendingBytes flushes it first, and fails if that flush does. An
// existing key is overwritten. key and value are copied.
func (x *Index) Put(bucket string, key, value []byte) error {
	if err := checkBucket(bucket); err != nil {
		return err
	}
	if err := checkEntry(key, value); err != nil {
		return err
	}
	return x.put(bucket, key, value)
}

// SetMeta sets a key of the index's own metadata (the journal mark the
// index covers, say), with the same bounds as an entry. It is pending
// like a Put, and lands in the same transaction as the puts before it:
// a mark set after the entries it covers is never on disk without them.
func (x *Index) SetMeta(key string, value []byte) error {
	if err := checkEntry([]byte(key), value); err != nil {
		return err
	}
	return x.put(metaBucket, []byte(key), value)
}

// put holds the entry, flushing first when it would not fit. After a
// flush the pending set is empty unless other Puts refilled it, and one
// entry always fits an empty set, so the loop ends.
func (x *Index) put(bucket string, key, value []byte) error {
	if x.readOnly {
		return ErrReadOnly
	}
	for {
		x.mu.Lock()
		if err := x.usable(); err != nil {
			x.mu.Unlock()
			return err
		}
		if n, b := x.pending.after(bucket, key, value); n <= MaxPendingEntries && b <= MaxPendingBytes {
			x.pending.put(bucket, key, value)
			x.mu.Unlock()
			return nil
		}
		x.mu.Unlock()
		if err := x.Flush(); err != nil {
			return err
		}
	}
}

// Get returns a copy of key's value in bucket: the pending value if there
// is one, else the file's. A bucket never written has no keys.
func (x *Index) Get(bucket string, key []byte) ([]byte, bool, error) {
	if err := checkBucket(bucket); err != nil {
		return nil, false, err
	}
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	return x.get(bucket, key)
}

// Meta returns a copy of the metadata value of key.
func (x *Index) Meta(key string) ([]byte, bool, error) {
	if err := checkKey([]byte(key)); err != nil {
		return nil, false, err
	}
	return x.get(metaBucket, []byte(key))
}

// get looks in pending, then in the batch being flushed, then in the file.
// An entry leaves flushing only after its transaction committed, so one
// that is in neither map is in the file or was never put.
func (x *Index) get(bucket string, key []byte) ([]byte, bool, error) {
	x.mu.Lock()
	if err := x.usable(); err != nil {
		x.mu.Unlock()
		return nil, false, err
	}
	v, ok := x.pending.get(bucket, key)
	if !ok && x.flushing != nil {
		v, ok = x.flushing.get(bucket, key)
	}
	x.mu.Unlock()
	if ok {
		return bytes.Clone(v), true, nil
	}
	var out []byte
	err := x.guard(func() error {
		return x.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket([]byte(bucket)); b != nil {
				if v := b.Get(key); v != nil {
					out = bytes.Clone(v)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, false, err
	}
	return out, out != nil, nil
}

// Pending reports how many entries (and their bytes) are held for the
// next flush.
func (x *Index) Pending() (entries, bytes int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pending.n, x.pending.bytes
}

// checkBucket holds a bucket name to 1 to MaxBucketBytes of
// A-Za-z0-9._:/- (the journal's kind rules).
func checkBucket(name string) error {
	if len(name) == 0 || len(name) > MaxBucketBytes {
		return fmt.Errorf("index: bucket name of %d bytes, not 1 to %d: %w", len(name), MaxBucketBytes, ErrBounds)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '/' || c == '-') {
			return fmt.Errorf("index: bucket name %q has %q, outside A-Za-z0-9._:/-: %w", name, c, ErrBounds)
		}
	}
	return nil
}

// checkKey holds a key to 1 to MaxKeyBytes bytes.
func checkKey(key []byte) error {
	if len(key) == 0 || len(key) > MaxKeyBytes {
		return fmt.Errorf("index: key of %d bytes, not 1 to %d: %w", len(key), MaxKeyBytes, ErrBounds)
	}
	return nil
}

// checkEntry holds a key to checkKey and a value to 1 to MaxValueBytes
// bytes (an empty value is refused, so that found and empty never blur).
func checkEntry(key, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) == 0 || len(value) > MaxValueBytes {
		return fmt.Errorf("index: value of %d bytes, not 1 to %d: %w", len(value), MaxValueBytes, ErrBounds)
	}
	return nil
}

// overlay is a set of puts held in memory, by bucket and key. Its values
// are its own copies and never change once put (a later put replaces the
// slice), so a reader may use one after the lock is released.
type overlay struct {
	buckets map[string]map[string][]byte
	n       int // entries
	bytes   int // len(key)+len(value) of every entry
}

func newOverlay() *overlay { return &overlay{buckets: map[string]map[string][]byte{}} }

func (o *overlay) get(bucket string, key []byte) ([]byte, bool) {
	v, ok := o.buckets[bucket][string(key)]
	return v, ok
}

// after returns the entries and bytes o would hold after put.
func (o *overlay) after(bucket string, key, value []byte) (n, b int) {
	if old, ok := o.buckets[bucket][string(key)]; ok {
		return o.n, o.bytes - len(old) + len(value)
	}
	return o.n + 1, o.bytes + len(key) + len(value)
}

func (o *overlay) put(bucket string, key, value []byte) {
	o.n, o.bytes = o.after(bucket, key, value)
	m := o.buckets[bucket]
	if m == nil {
		m = map[string][]byte{}
		o.buckets[bucket] = m
	}
	m[string(key)] = bytes.Clone(value)
}
