package index

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// chunkEntries is how many entries Range and Last read from the file in
// one read transaction. Between chunks no transaction is open, so a
// Range's fn may call the index (even Put, whose flush may grow and remap
// the file, which waits for every open read transaction).
const chunkEntries = 256

// Last returns the n greatest keys of bucket and their values, greatest
// first, pending puts included: with keys that are big-endian sequence
// numbers (SeqKey), the latest n. n is 1 to MaxLast.
func (x *Index) Last(bucket string, n int) ([]Entry, error) {
	if err := checkBucket(bucket); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxLast {
		return nil, fmt.Errorf("index: Last of %d entries, not 1 to %d: %w", n, MaxLast, ErrBounds)
	}
	out := make([]Entry, 0, min(n, chunkEntries))
	err := x.merge(bucket, nil, true, func(e Entry) (bool, error) {
		out = append(out, e)
		return len(out) < n, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Range calls fn for every key of bucket at or after from (every key, for
// an empty from) in order, pending puts included, until fn returns an
// error, which Range returns. fn gets copies, and runs with no lock of
// the index held and no read transaction open, so it may call the index;
// an entry Put during the Range may or may not be seen.
func (x *Index) Range(bucket string, from []byte, fn func(key, value []byte) error) error {
	if err := checkBucket(bucket); err != nil {
		return err
	}
	return x.merge(bucket, from, false, func(e Entry) (bool, error) {
		return true, fn(e.Key, e.Value)
	})
}

// merge hands fn the entries of the pending puts (as they were when it
// started) and of the file, in key order (descending when desc), a
// pending value in place of the file's for the same key, until fn says
// to stop or fails.
func (x *Index) merge(bucket string, from []byte, desc bool, fn func(Entry) (more bool, err error)) error {
	held, err := x.held(bucket, from, desc)
	if err != nil {
		return err
	}
	s := &stream{x: x, bucket: []byte(bucket), from: from, desc: desc}
	for {
		t, tok, err := s.peek()
		if err != nil {
			return err
		}
		var e Entry
		switch {
		case len(held) > 0 && (!tok || before(held[0].Key, t.Key, desc)):
			e, held = held[0], held[1:]
		case len(held) > 0 && bytes.Equal(held[0].Key, t.Key):
			e, held = held[0], held[1:]
			s.pop()
		case tok:
			e = t
			s.pop()
		default:
			return nil
		}
		if more, err := fn(e); err != nil || !more {
			return err
		}
	}
}

// before reports whether a comes before b in the order of the walk.
func before(a, b []byte, desc bool) bool {
	if desc {
		return bytes.Compare(a, b) > 0
	}
	return bytes.Compare(a, b) < 0
}

// held returns copies of the pending and flushing entries of bucket at or
// after from, in the order of the walk, a pending value replacing a
// flushing one.
func (x *Index) held(bucket string, from []byte, desc bool) ([]Entry, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.usable(); err != nil {
		return nil, err
	}
	m := map[string][]byte{}
	if x.flushing != nil {
		for k, v := range x.flushing.buckets[bucket] {
			m[k] = v
		}
	}
	for k, v := range x.pending.buckets[bucket] {
		m[k] = v
	}
	out := make([]Entry, 0, len(m))
	for k, v := range m {
		if k >= string(from) {
			out = append(out, Entry{Key: []byte(k), Value: bytes.Clone(v)})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if desc {
			return bytes.Compare(b.Key, a.Key)
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return out, nil
}

// stream walks a bucket of the file in chunks, each read in a read
// transaction of its own and copied out.
type stream struct {
	x       *Index
	bucket  []byte
	from    []byte // ascending: the first key (inclusive)
	desc    bool
	last    []byte // the last key read; the next chunk starts past it
	started bool
	done    bool
	buf     []Entry
}

func (s *stream) peek() (Entry, bool, error) {
	if len(s.buf) == 0 && !s.done {
		if err := s.fill(); err != nil {
			return Entry{}, false, err
		}
	}
	if len(s.buf) == 0 {
		return Entry{}, false, nil
	}
	return s.buf[0], true, nil
}

func (s *stream) pop() { s.buf = s.buf[1:] }

// fill reads the next chunk.
func (s *stream) fill() error {
	var chunk []Entry
	err := s.x.guard(func() error {
		return s.x.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(s.bucket)
			if b == nil {
				return nil
			}
			c := b.Cursor()
			for k, v := s.first(c); k != nil && len(chunk) < chunkEntries; k, v = s.step(c) {
				if v != nil { // a nested bucket: none is ever made
					chunk = append(chunk, Entry{Key: bytes.Clone(k), Value: bytes.Clone(v)})
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	s.started = true
	if len(chunk) < chunkEntries {
		s.done = true
	}
	if len(chunk) > 0 {
		s.last = chunk[len(chunk)-1].Key
	}
	s.buf = chunk
	return nil
}

// first positions c at the first key of the chunk.
func (s *stream) first(c *bolt.Cursor) ([]byte, []byte) {
	switch {
	case !s.started && !s.desc:
		return c.Seek(s.from)
	case !s.started:
		return c.Last()
	case !s.desc:
		k, v := c.Seek(s.last)
		if bytes.Equal(k, s.last) {
			return c.Next()
		}
		return k, v
	default:
		k, v := c.Seek(s.last)
		if k == nil {
			return c.Last()
		}
		for k != nil && bytes.Compare(k, s.last) >= 0 {
			k, v = c.Prev()
		}
		return k, v
	}
}

func (s *stream) step(c *bolt.Cursor) ([]byte, []byte) {
	if s.desc {
		return c.Prev()
	}
	return c.Next()
}
