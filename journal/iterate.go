package journal

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Iterate calls fn for every durable record from seq from (1 when from is 0)
// to the last record durable when Iterate was called (on a read-only
// journal, the last one Open found), in order, each with its Place. It reads the
// segments from disk (no history is kept in memory), checking each frame's
// checksum, sequence and hash link again; a mismatch is a *CorruptError. An
// error from fn stops the iteration and is returned as is.
func (j *Journal) Iterate(from uint64, fn func(Record) error) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	last := j.lastSeq
	segs := append([]segment(nil), j.segs...)
	j.mu.Unlock()
	if from == 0 {
		from = 1
	}
	if from > last {
		return nil
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first > from }) - 1
	if i < 0 {
		return fmt.Errorf("journal: no segment holds seq %d", from)
	}
	it := iterator{dir: j.dir, from: from, last: last, fn: fn}
	for ; i < len(segs) && segs[i].first <= last; i++ {
		limit := last + 1
		if i+1 < len(segs) {
			limit = min(limit, segs[i+1].first)
		}
		if err := it.segment(segs[i], limit); err != nil {
			return err
		}
	}
	return nil
}

type iterator struct {
	dir      string
	from     uint64
	last     uint64
	fn       func(Record) error
	prev     [hashSize]byte
	havePrev bool
	payload  []byte
	scratch  []byte
}

// segment yields the records of seg with seq below limit.
func (it *iterator) segment(seg segment, limit uint64) error {
	path := filepath.Join(it.dir, seg.name)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	corrupt := func(off int64, format string, args ...any) error {
		return &CorruptError{Segment: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	var hdr [headerSize]byte
	off := int64(0)
	for seq := seg.first; seq < limit; seq++ {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return corrupt(off, "record %d: reading header: %v", seq, err)
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n == 0 || n > MaxRecordBytes {
			return corrupt(off, "record %d: length %d", seq, n)
		}
		if cap(it.payload) < int(n) {
			it.payload = make([]byte, n)
		}
		payload := it.payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return corrupt(off, "record %d: reading payload: %v", seq, err)
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return corrupt(off, "record %d: checksum mismatch", seq)
		}
		if seq >= it.from {
			rec, err := decodeRecord(payload, &it.scratch)
			if err != nil {
				return corrupt(off, "record %d: %v", seq, err)
			}
			if rec.Seq != seq {
				return corrupt(off, "record has seq %d, want %d", rec.Seq, seq)
			}
			if it.havePrev && !bytes.Equal(rec.Prev, it.prev[:]) {
				return corrupt(off, "record %d: prev is not the hash of record %d", seq, seq-1)
			}
			rec.Place = Place{Seq: seq, Segment: seg.first, Offset: off}
			if err := it.fn(rec); err != nil {
				return err
			}
		}
		it.prev = sha256.Sum256(payload)
		it.havePrev = true
		off += headerSize + int64(n)
	}
	return nil
}
