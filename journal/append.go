package journal

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// batch is a run of consecutive frames written with one write and made
// durable with one fdatasync. The goroutine that created it is its leader;
// the others follow and wait for done.
type batch struct {
	buf     []byte
	off     int64  // where buf goes in its segment
	newSeg  uint64 // when non-zero, the leader creates this segment first
	newSize int64  // preallocation of the new segment
	growTo  int64  // when non-zero, the leader grows the (empty) current segment first
	records uint64
	lastSeq uint64
	head    [hashSize]byte
	config  []byte // config in force after the batch, when it binds or rebinds
	rebinds int
	turn    chan struct{} // closed when the batches before it are done
	dropped bool          // failed unwritten because a batch before it failed (err is set)
	linked  bool          // holds an AppendLinked record: its loss stops the journal
	done    chan struct{} // closed when the batch is durable or failed
	err     error         // read after done
}

// Append adds a record of kind with body encoded as deterministic CBOR and
// returns its sequence number once it is on disk (fdatasync). Concurrent
// callers are group-committed: every batch of waiting records costs one
// write and one fdatasync. kind is 1 to MaxKindBytes of A-Za-z0-9._:/-
// ("bind" and "rebind" are reserved); the body must pass the decoding
// limits (MaxNestedLevels-1 levels, MaxArrayElements, MaxMapPairs) and the
// payload must fit MaxRecordBytes, else nothing is written. A body passed
// as cbor.RawMessage is written as given (checked only for well-formedness).
//
// A failed write (a full disk, say) fails the records of its batch and of
// the batches queued behind it with an error matching ErrNotWritten: what
// the batch wrote is removed and that removal made durable before any of
// them returns, so none of them is in the log, now or after a restart.
// Later appends are tried again (once the disk has room they succeed);
// nothing is retried on the caller's behalf. A failed fdatasync stops the
// journal for good: that Append and every later one return an error
// matching ErrFailed, and whether the failed batch is on disk is known only
// after the journal is reopened (see Failed).
func (j *Journal) Append(kind string, body any) (uint64, error) {
	p, err := j.AppendAt(kind, body)
	return p.Seq, err
}

// AppendAt is Append that returns the record's place in the log (its
// sequence number, segment and offset) once it is durable, for an index
// of the owner's that reads it again with ReadAt. Its errors are
// Append's; on error the place is zero.
func (j *Journal) AppendAt(kind string, body any) (Place, error) {
	b, err := encodeRecord(kind, body)
	if err != nil {
		return Place{}, err
	}
	return j.submit(kind, b, nil, nil)
}

// AppendLinked is Append for a record that the caller builds on before it
// is durable: a link of the caller's own chain (a signed receipt, say),
// which the next link names while this one is still being written. If such
// a record is lost and a later one lands, the disk holds a link whose
// predecessor is missing, for good. So a linked record that is not written
// stops the journal, as a failed fdatasync does: for any reason (refused as
// invalid or too large, its batch's write failed and was removed, a batch
// before it failed), the journal stops in the leader before any append of
// that batch is answered and before any later batch is written, Failed is
// closed, and nothing appended after it can reach the disk.
//
// For that to keep the caller's chain whole, its links must take their
// places in the log in chain order. framed, when not nil, is called exactly
// once, when the record has its place in the log (or was refused), before
// AppendLinked waits for the disk: a caller that numbers its links under a
// lock of its own releases that lock in framed. It runs under the journal's
// lock, so it must not call the journal.
//
// It returns the record's sequence number once it is durable, as Append
// does. Its error, and that of every append of its batch and of the batches
// queued behind it, matches ErrFailed and also ErrNotWritten: those records
// are known not to be in the log (their cause, ENOSPC say, is kept). Every
// later append fails with ErrFailed alone. A failed fdatasync of its batch
// is ErrFailed alone, as for Append: the record may be on disk.
func (j *Journal) AppendLinked(kind string, body any, framed func()) (uint64, error) {
	p, err := j.AppendLinkedAt(kind, body, framed)
	return p.Seq, err
}

// AppendLinkedAt is AppendLinked that returns the record's place in the
// log once it is durable, as AppendAt does. Its errors are
// AppendLinked's; on error the place is zero.
func (j *Journal) AppendLinkedAt(kind string, body any, framed func()) (Place, error) {
	if framed == nil {
		framed = func() {}
	}
	b, err := encodeRecord(kind, body)
	if err != nil {
		j.mu.Lock()
		if j.usable() == nil {
			err = j.stopUnwritten(err)
		}
		j.mu.Unlock()
		framed()
		return Place{}, err
	}
	return j.submit(kind, b, nil, framed)
}

// encodeRecord checks kind and encodes body as Append's contract says.
func encodeRecord(kind string, body any) ([]byte, error) {
	if !validKind(kind) {
		return nil, fmt.Errorf("journal: kind %q is not 1 to %d of A-Za-z0-9._:/-: %w", kind, MaxKindBytes, ErrInvalidRecord)
	}
	if kind == kindBind || kind == kindRebind {
		return nil, fmt.Errorf("journal: kind %q is reserved: %w", kind, ErrInvalidRecord)
	}
	b, err := encMode.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("journal: encode %s body: %v: %w", kind, err, ErrInvalidRecord)
	}
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("journal: %s body of %d bytes exceeds MaxRecordBytes (%d): %w", kind, len(b), MaxRecordBytes, ErrRecordTooLarge)
	}
	if err := bodyMode.Wellformed(b); err != nil {
		return nil, fmt.Errorf("journal: %s body is outside the record limits (%d nesting levels, %d array elements, %d map pairs): %v: %w",
			kind, MaxNestedLevels-1, MaxArrayElements, MaxMapPairs, err, ErrInvalidRecord)
	}
	return b, nil
}

// usable reports why no record can be appended now, or nil. Called with mu held.
func (j *Journal) usable() error {
	switch {
	case j.closed:
		return ErrClosed
	case j.opts.ReadOnly:
		return fmt.Errorf("journal: %s: %w", j.dir, ErrReadOnly)
	}
	return j.err
}

// submit frames a record into the open batch (or a new one), waits until
// it is durable and returns its place. setConfig, for bind and rebind
// records, is the config in force after the record; a rebind's body is
// built here because its before config is the one in force at its place
// in the log. A non-nil
// framed marks an AppendLinked record; it is called, with mu held, once the
// record has its place (or was refused), before any wait.
func (j *Journal) submit(kind string, body, setConfig []byte, framed func()) (Place, error) {
	linked := framed != nil
	j.mu.Lock()
	if err := j.usable(); err != nil {
		if linked {
			framed()
		}
		j.mu.Unlock()
		return Place{}, err
	}
	if kind == kindRebind {
		var err error
		if body, err = rebindRecordBody(j.tailConfig, setConfig); err != nil {
			j.mu.Unlock()
			return Place{}, fmt.Errorf("journal: encode rebind record: %w", err)
		}
	}
	seq := j.tailSeq + 1
	at := time.Now().UnixMilli()
	n := payloadSize(seq, kind, at, len(body))
	if n > MaxRecordBytes {
		err := fmt.Errorf("journal: %s record of %d bytes exceeds MaxRecordBytes (%d): %w", kind, n, MaxRecordBytes, ErrRecordTooLarge)
		if linked {
			err = j.stopUnwritten(err)
			framed()
		}
		j.mu.Unlock()
		return Place{}, err
	}
	frame := int64(headerSize + n)
	b, leader := j.batchFor(frame)
	place := Place{Seq: seq, Segment: j.tailSeg, Offset: j.tailOff}
	b.linked = b.linked || linked
	start := len(b.buf)
	b.buf = append(b.buf, 0, 0, 0, 0, 0, 0, 0, 0)
	b.buf = appendPayload(b.buf, seq, &j.tailHead, kind, at, body)
	payload := b.buf[start+headerSize:]
	putHeader(b.buf[start:], payload)
	j.tailHead = sha256.Sum256(payload)
	j.tailSeq = seq
	j.tailOff += frame
	b.records++
	b.lastSeq = seq
	b.head = j.tailHead
	if setConfig != nil {
		b.config = setConfig
		j.tailConfig = setConfig
		if kind == kindRebind {
			b.rebinds++
		}
	}
	if linked {
		framed()
	}
	var err error
	switch {
	case leader && !j.flushing:
		j.flushing = true
		j.lead(b)
		err = b.err
		j.mu.Unlock()
	case leader:
		j.mu.Unlock()
		crashPoint("queued")
		<-b.turn
		j.mu.Lock()
		if !b.dropped {
			j.lead(b)
		}
		err = b.err
		j.mu.Unlock()
	default:
		j.mu.Unlock()
		crashPoint("queued")
		<-b.done
		err = b.err
	}
	if err != nil {
		return Place{}, err
	}
	return place, nil
}

// batchFor returns the batch a frame of the given size joins, and whether
// the caller created it (and so leads it). A frame that does not fit the
// current segment starts a batch that first creates the next segment,
// sized to hold at least the frame. Called with mu held.
func (j *Journal) batchFor(frame int64) (*batch, bool) {
	if j.tailOff+frame > j.tailSegSize {
		size := max(j.segmentSize, frame)
		b := j.newBatch(0)
		if j.tailOff == 0 && j.tailSegSize > 0 {
			// The current segment holds nothing (a crash right after
			// creating it, for a smaller record): it already bears this
			// seq's name, so grow it instead of creating another.
			b.growTo = size
		} else {
			b.newSeg, b.newSize = j.tailSeq+1, size
			j.tailSeg = b.newSeg
		}
		j.queue = append(j.queue, b)
		j.tailOff, j.tailSegSize = 0, size
		return b, true
	}
	if n := len(j.queue); n > 0 {
		return j.queue[n-1], false
	}
	b := j.newBatch(j.tailOff)
	j.queue = append(j.queue, b)
	return b, true
}

func (j *Journal) newBatch(off int64) *batch {
	b := &batch{off: off, turn: make(chan struct{}), done: make(chan struct{})}
	if n := len(j.free); n > 0 {
		b.buf = j.free[n-1][:0]
		j.free = j.free[:n-1]
	}
	return b
}

// lead writes and syncs b, which must be the first queued batch, publishes
// the outcome and passes the turn to the next batch. Called with mu held;
// mu is released during the I/O so that the next batch can fill.
func (j *Journal) lead(b *batch) {
	copy(j.queue, j.queue[1:])
	j.queue[len(j.queue)-1] = nil
	j.queue = j.queue[:len(j.queue)-1]
	err := j.err
	j.mu.Unlock()
	if err == nil {
		err = j.write(b)
	}
	j.mu.Lock()
	var stop *syncFailure
	switch {
	case j.err != nil:
		b.err = j.err
	case errors.As(err, &stop):
		j.stop(stop.err)
		b.err = j.err
	case err != nil:
		if !errors.Is(err, ErrNotWritten) {
			err = &notWritten{err} // failed before it wrote anything
		}
		dropped, linked := j.dropQueued()
		queuedErr := error(&notWritten{fmt.Errorf("a write before it failed: %w", err)})
		if b.linked || linked {
			// A linked record is lost: stop before anyone is answered
			// and before a later batch can put its successor on disk.
			err = j.stopUnwritten(err)
			queuedErr = err
		}
		b.err = err
		answerDropped(dropped, queuedErr)
	default:
		j.lastSeq, j.head = b.lastSeq, b.head
		if b.config != nil {
			j.config, j.binding = b.config, sha256.Sum256(b.config)
			j.rebinds += b.rebinds
		}
		s := &j.segs[len(j.segs)-1]
		s.records += b.records
		s.last = b.lastSeq
		s.end = b.off + int64(len(b.buf))
	}
	close(b.done)
	if cap(b.buf) <= 4<<20 && len(j.free) < 4 {
		j.free = append(j.free, b.buf[:0])
	}
	b.buf = nil
	if len(j.queue) > 0 {
		close(j.queue[0].turn)
	} else {
		j.flushing = false
		j.idle.Broadcast()
	}
}

// write creates the batch's segment if it starts one, then writes the batch
// with one pwritev and makes it durable with one fdatasync. It runs in the
// leader without mu. A failure before anything is written, or a failed
// write whose bytes were removed (see removeFailed), returns a *notWritten
// or a plain error; a failed fdatasync returns a *syncFailure.
func (j *Journal) write(b *batch) error {
	if b.newSeg != 0 {
		f, sparse, err := createSegment(j.dir, b.newSeg, b.newSize, j.log)
		if err != nil {
			return err
		}
		if j.seg != nil {
			j.seg.Close() // fully synced; nothing can be lost by closing it
		}
		j.seg, j.segPath, j.segFirst = f, filepath.Join(j.dir, segName(b.newSeg)), b.newSeg
		j.segSize, j.zeroedTo, j.sparse, j.reallocate = b.newSize, 0, sparse, false
		j.mu.Lock()
		j.segs = append(j.segs, segment{name: segName(b.newSeg), first: b.newSeg, size: b.newSize})
		j.mu.Unlock()
		crashPoint("segment-created")
	}
	if b.growTo != 0 || j.reallocate {
		// The fdatasync below makes the new size durable with the data.
		// After a removed failed write, the segment is preallocated again:
		// its space may have been given back, and the disk may have room now.
		size := max(b.growTo, j.segSize)
		sparse, err := preallocate(j.seg, size, j.log)
		if err != nil {
			return err
		}
		j.segSize, j.sparse, j.reallocate = size, sparse, false
		j.mu.Lock()
		j.segs[len(j.segs)-1].size = size
		j.mu.Unlock()
	}
	fd := int(j.seg.Fd())
	// Blocks that fallocate reserved are "unwritten": the first fdatasync
	// over each one must also commit the change of its extent to written,
	// which costs more than the data for a large batch. So the write
	// extends past the batch with zeros (never below it: everything from
	// b.off on is this batch's or not yet written) up to zeroAhead bytes
	// beyond, and the batches that follow overwrite written blocks. A
	// sparse segment has no unwritten blocks, and zeros there would only
	// take space.
	iov := j.iov[:1]
	iov[0] = b.buf
	if end := b.off + int64(len(b.buf)); end > j.zeroedTo && !j.sparse {
		pad := zeroChunk[:max(0, min(int64(len(zeroChunk)), j.segSize-end))]
		iov = append(iov, pad)
		j.zeroedTo = end + int64(len(pad))
	}
	err := faultPoint("write")
	if err == nil {
		err = pwriteFull(fd, iov, b.off)
	}
	if err != nil {
		return j.removeFailed(b, fmt.Errorf("write %s at offset %d: %w", j.segPath, b.off, err))
	}
	crashPoint("after-write")
	err = faultPoint("sync")
	if err == nil {
		err = unix.Fdatasync(fd)
	}
	if err != nil {
		return &syncFailure{fmt.Errorf("fdatasync %s: %w", j.segPath, err)}
	}
	// Before any append of the batch is answered, so that a reader of
	// the live log sees every acknowledged record.
	j.wm.write(watermark{Seq: b.lastSeq, Segment: j.segFirst, End: b.off + int64(len(b.buf))}, j.log)
	crashPoint("after-sync")
	return nil
}

// zeroAhead is how far past a batch its write extends the written (zeroed)
// part of the segment, when the batch reaches beyond it.
const zeroAhead = 1 << 20

// zeroChunk is read-only zeros for that.
var zeroChunk = make([]byte, zeroAhead)

// pwriteFull writes all of iov at off with pwritev, continuing after a
// short write (a full disk makes a write short, and the next one then
// fails with ENOSPC); a write of nothing without an error is
// io.ErrShortWrite. shortWriteHook can cut it at a chosen byte.
func pwriteFull(fd int, iov [][]byte, off int64) error {
	if shortWriteHook != nil {
		want := 0
		for _, b := range iov {
			want += len(b)
		}
		if n, err := shortWriteHook(want); err != nil {
			if werr := writeAll(fd, cutIov(iov, n), off); werr != nil {
				return werr
			}
			return fmt.Errorf("short write of %d of %d bytes: %w", n, want, err)
		}
	}
	return writeAll(fd, iov, off)
}

func writeAll(fd int, iov [][]byte, off int64) error {
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 && len(iov) > 0 {
			if n < len(iov[0]) {
				iov = append([][]byte{iov[0][n:]}, iov[1:]...)
				n = 0
			} else {
				n -= len(iov[0])
				iov = iov[1:]
			}
		}
		for len(iov) > 0 && len(iov[0]) == 0 {
			iov = iov[1:]
		}
	}
	return nil
}

// cutIov returns the first n bytes of iov.
func cutIov(iov [][]byte, n int) [][]byte {
	var out [][]byte
	for _, b := range iov {
		if n <= 0 {
			break
		}
		k := min(n, len(b))
		out = append(out, b[:k])
		n -= k
	}
	return out
}
