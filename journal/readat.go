package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// readAtChunk is how much ReadAt reads at once: header and payload of
// any record up to this size come in one pread; a larger one takes a
// second for the rest of its payload.
const readAtChunk = 16 << 10

var readAtBufs = sync.Pool{New: func() any { b := make([]byte, readAtChunk); return &b }}

// ReadAt reads the record at place p (from Iterate, OnRecord, AppendAt or
// AppendLinkedAt) at once: one open of its segment and one pread of its
// header and payload (two for a record over 16 KiB). It verifies the
// frame's CRC-32C, the strict decoding and that the record's seq is p.Seq,
// as a scan does; it cannot check the hash link to the record before it,
// which it does not read, so it trusts the log up to p as the Open that
// verified it did.
//
// A place that is no place of a durable record (seq 0 or beyond the last
// durable record, a segment the log does not have, a seq that segment
// does not hold, an offset outside the segment's durable part) is an error
// matching ErrBadPlace. A place inside the durable part whose bytes are not
// record p.Seq (a wrong offset, a damaged segment) is a *CorruptError
// naming the segment and offset.
func (j *Journal) ReadAt(p Place) (Record, error) {
	path, limit, err := j.placeBounds(p)
	if err != nil {
		return Record{}, err
	}
	// The file is opened without os.File, whose poller registration and
	// cleanup cost more system calls than the read.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Record{}, fmt.Errorf("journal: open segment %s: %w", path, err)
	}
	defer unix.Close(fd)
	bp := readAtBufs.Get().(*[]byte)
	defer readAtBufs.Put(bp)
	buf := (*bp)[:min(readAtChunk, limit-p.Offset)]
	if err := preadFull(fd, path, buf, p.Offset); err != nil {
		return Record{}, err
	}
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Segment: path, Offset: p.Offset, Reason: fmt.Sprintf(format, args...)}
	}
	if len(buf) < headerSize {
		return Record{}, corrupt("incomplete header: the durable part of the segment ends at offset %d", limit)
	}
	if n := int64(binary.LittleEndian.Uint32(buf)); n > int64(len(buf)-headerSize) && n <= MaxRecordBytes {
		if n > limit-p.Offset-headerSize {
			return Record{}, corrupt("record of %d bytes runs past the durable end of the segment (offset %d)", n, limit)
		}
		whole := make([]byte, headerSize+n)
		copy(whole, buf)
		if err := preadFull(fd, path, whole[len(buf):], p.Offset+int64(len(buf))); err != nil {
			return Record{}, err
		}
		buf = whole
	}
	var scratch []byte
	rec, _, _, err := decodeFrame(buf, &scratch)
	if err != nil {
		return Record{}, corrupt("record %d: %v", p.Seq, err)
	}
	if rec.Seq != p.Seq {
		return Record{}, corrupt("the record here has seq %d, not %d", rec.Seq, p.Seq)
	}
	rec.Place = p
	return rec, nil
}

// placeBounds checks p against the durable log and returns its segment's
// path and the end of that segment's durable part.
func (j *Journal) placeBounds(p Place) (string, int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return "", 0, ErrClosed
	}
	bad := func(format string, args ...any) (string, int64, error) {
		return "", 0, fmt.Errorf("journal: %s: place %d/%s@%d: %s: %w", j.dir, p.Seq, segName(p.Segment), p.Offset,
			fmt.Sprintf(format, args...), ErrBadPlace)
	}
	if p.Seq == 0 || p.Seq > j.lastSeq {
		return bad("seq %d is not 1 to the last durable record (seq %d)", p.Seq, j.lastSeq)
	}
	i := sort.Search(len(j.segs), func(i int) bool { return j.segs[i].first >= p.Segment })
	if i == len(j.segs) || j.segs[i].first != p.Segment {
		return bad("the log has no segment %s", segName(p.Segment))
	}
	next := j.lastSeq + 1
	if i+1 < len(j.segs) {
		next = min(next, j.segs[i+1].first)
	}
	if p.Seq < p.Segment || p.Seq >= next {
		return bad("segment %s holds seq %d to %d, not %d", segName(p.Segment), p.Segment, next-1, p.Seq)
	}
	// Every record of a segment is durable up to its end (the last
	// segment's grows under appends, and only the durable part counts).
	limit := j.segs[i].end
	if p.Offset < 0 || p.Offset >= limit {
		return bad("offset %d is outside the durable part of the segment, [0, %d)", p.Offset, limit)
	}
	return filepath.Join(j.dir, j.segs[i].name), limit, nil
}

// preadFull reads len(b) bytes of the file fd (at path) at off.
func preadFull(fd int, path string, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pread(fd, b, off)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("journal: read %s at offset %d: %w", path, off, err)
		case n == 0:
			return fmt.Errorf("journal: read %s at offset %d: %w", path, off, io.ErrUnexpectedEOF)
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
