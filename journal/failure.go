package journal

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// What the journal does when an append's I/O fails. A failed write has a
// known outcome once its bytes are removed: none of its records is in the
// log, so the batch fails with ErrNotWritten and later appends are tried
// again. A failed fdatasync (or a removal that itself failed) has an
// unknown outcome: the page cache may hold data the disk lost, or the disk
// may hold records the journal reported failed. Only a reopen, which reads
// the disk, knows; so the journal stops for good (ErrFailed).

// ErrNotWritten is matched by an append error whose record is not in the
// log and never will be: its write failed (a full disk, say) and what it
// wrote was removed, durably, before the error was returned; or a batch
// before it failed so it was never written. Nothing needs to be undone;
// a later append may succeed.
var ErrNotWritten = errors.New("journal: append not written")

// notWritten is a failed append whose record is not in the log.
type notWritten struct{ cause error }

func (e *notWritten) Error() string {
	return ErrNotWritten.Error() + ": " + strings.TrimPrefix(e.cause.Error(), "journal: ")
}

func (e *notWritten) Unwrap() []error { return []error{ErrNotWritten, e.cause} }

// syncFailure is an I/O failure after which what is on disk is unknown;
// the leader stops the journal with it.
type syncFailure struct{ err error }

func (e *syncFailure) Error() string { return e.err.Error() }
func (e *syncFailure) Unwrap() error { return e.err }

// removeFailed undoes a failed write of batch b before anyone is told:
// a preallocated segment has the batch's range zeroed (its blocks are
// allocated, so zeroing needs no space), a sparse one (or one whose zeroing
// fails) is truncated back to b.off, the end of the last durable record;
// either way fdatasync makes it durable, the removal is logged, and the next
// batch preallocates the segment again. It returns the batch's error, or a
// *syncFailure when the removal could not be made. Runs in the leader.
func (j *Journal) removeFailed(b *batch, cause error) error {
	fd := int(j.seg.Fd())
	n := int64(len(b.buf)) // the zero padding after it is zeros whatever happened
	how := "zeroed"
	err := faultPoint("undo")
	if err == nil && !j.sparse {
		if err = zeroRange(j.seg, b.off, b.off+n); err != nil {
			err = fmt.Errorf("zero %s at offset %d: %w", j.segPath, b.off, err)
		}
	}
	if err == nil && j.sparse || err != nil && !errors.Is(err, errInjectedUndo) {
		how, err = "truncated", unix.Ftruncate(fd, b.off)
		if err != nil {
			err = fmt.Errorf("truncate %s to %d bytes: %w", j.segPath, b.off, err)
		}
	}
	if err == nil {
		err = faultPoint("undo-sync")
	}
	if err == nil {
		err = unix.Fdatasync(fd)
	}
	if err != nil {
		return &syncFailure{fmt.Errorf("%w; removing what it wrote failed: %w", cause, err)}
	}
	j.zeroedTo = min(j.zeroedTo, b.off)
	j.reallocate = true
	j.log.Warn("journal: write failed; removed what it wrote before answering, none of its records is in the log",
		"segment", j.segPath, "offset", b.off, "bytes", n, "records", b.records, "removal", how, "err", cause)
	return &notWritten{cause}
}

// errInjectedUndo is what a test returns at "undo" to make the removal
// fail outright, past the truncate fallback.
var errInjectedUndo = errors.New("injected: removal failed")

// stop makes the journal refuse every later append with ErrFailed and
// tells the owner (Failed). Called with mu held.
func (j *Journal) stop(cause error) {
	j.err = fmt.Errorf("%w: %s: what is on disk is unknown: %w", ErrFailed, j.dir, cause)
	j.log.Error("journal: stopped for good: what is on disk is unknown until the journal is reopened",
		"dir", j.dir, "err", cause)
	close(j.failed)
}

// stopUnwritten stops the journal for good because a linked record
// (AppendLinked) is not written, and returns the error its appends get:
// ErrFailed, and ErrNotWritten since the record is known not to be in the
// log. Called with mu held, before any append of the batch is answered.
func (j *Journal) stopUnwritten(cause error) error {
	// Later appends get j.err, which does not match ErrNotWritten or the
	// cause: they were refused, not tried.
	j.err = fmt.Errorf("%w: %s: a linked record was not written, so no later record may follow it: %v", ErrFailed, j.dir, cause)
	j.log.Error("journal: stopped for good: a linked record was not written, and later records build on it; reopen the journal to go on from what is on disk",
		"dir", j.dir, "err", cause)
	close(j.failed)
	if !errors.Is(cause, ErrNotWritten) {
		cause = &notWritten{cause}
	}
	return &linkedLoss{stop: j.err, cause: cause}
}

// linkedLoss is the error of an append lost with a linked record: the
// journal's stop (ErrFailed) and the record's own failure (ErrNotWritten
// and its cause).
type linkedLoss struct{ stop, cause error }

func (e *linkedLoss) Error() string   { return e.stop.Error() }
func (e *linkedLoss) Unwrap() []error { return []error{e.stop, e.cause} }

// dropQueued takes every batch queued behind a failed one off the queue
// (their records chain on the failed batch's, so none can be written) and
// rewinds the tail to the durable state so that the next append follows
// the last durable record. It returns them, not yet answered, and whether
// one holds a linked record. Called with mu held.
func (j *Journal) dropQueued() (dropped []*batch, linked bool) {
	dropped = append(dropped, j.queue...)
	for i, q := range j.queue {
		linked = linked || q.linked
		j.queue[i] = nil
	}
	j.queue = j.queue[:0]
	j.tailSeq, j.tailHead, j.tailConfig = j.lastSeq, j.head, j.config
	j.tailOff, j.tailSegSize, j.tailSeg = 0, 0, 0
	if n := len(j.segs); n > 0 {
		j.tailOff, j.tailSegSize, j.tailSeg = j.segs[n-1].end, j.segs[n-1].size, j.segs[n-1].first
	}
	return dropped, linked
}

// answerDropped fails the dropped batches, unwritten, with err.
func answerDropped(dropped []*batch, err error) {
	for _, q := range dropped {
		q.err = err
		q.dropped = true
		close(q.done)
		close(q.turn)
	}
}
