package journal

import (
	"errors"
	"fmt"
)

var (
	// ErrLocked is returned by Open when another Journal (in this process
	// or another) holds the directory's lock.
	ErrLocked = errors.New("journal: locked by another opener")

	// ErrBindingMismatch is returned by Open when the given config, owner
	// or format differs from what the log is bound to.
	ErrBindingMismatch = errors.New("journal: binding mismatch")

	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("journal: corrupt")

	// ErrClosed is returned by Append, Rebind, Iterate and Close once the
	// journal is closed.
	ErrClosed = errors.New("journal: closed")

	// ErrReadOnly is returned by Append and Rebind on a journal opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("journal: opened read-only")

	// ErrRecordTooLarge is returned by Append and Rebind when the payload
	// would exceed MaxRecordBytes. Nothing is written.
	ErrRecordTooLarge = errors.New("journal: record too large")

	// ErrFailed is matched by every append error after a failed
	// fdatasync (or a failed write that could not be removed): what is on
	// disk is unknown, so the journal refuses every append until it is
	// closed and opened again, which reads what is really there; the
	// records of the append that got it may or may not be there. It is
	// also matched after a linked record (AppendLinked) was not written:
	// the owner's state is ahead of the disk, so nothing may follow it;
	// an error that also matches ErrNotWritten says that its record is
	// known not to be there. Failed reports it to the owner, which should
	// exit so that its supervisor restarts it.
	ErrFailed = errors.New("journal: stopped for good until it is reopened")

	// ErrInvalidRecord is returned by Append for a kind outside the kind
	// rules (or a reserved kind) or a body beyond the decoding limits.
	// Nothing is written.
	ErrInvalidRecord = errors.New("journal: invalid record")

	// ErrMarkMismatch is matched by the error of an Open with
	// Options.From whose mark does not match the log (or the options):
	// nothing on disk was changed, and an Open without From, which reads
	// the whole log, gives the log's own verdict.
	ErrMarkMismatch = errors.New("journal: mark does not match the log")

	// ErrBadPlace is matched by the error of ReadAt for a place that is
	// no place of a durable record: beyond the durable end, in no
	// segment, or outside the segment it names. A place inside the
	// durable part of its segment whose bytes are not its record is a
	// *CorruptError instead.
	ErrBadPlace = errors.New("journal: not the place of a durable record")
)

// markMismatch is the error of a From mark that does not match the log.
func markMismatch(dir string, m *Mark, reason string) error {
	return fmt.Errorf("journal: %s: the mark at seq %d does not match: %s (open without From to read the whole log): %w",
		dir, m.Seq, reason, ErrMarkMismatch)
}

// CorruptError reports damage that is not a torn tail: a bad record that
// valid records follow, damage in a segment that is not the last, a broken
// hash chain or sequence. Open refuses such a log; nothing is repaired.
type CorruptError struct {
	Segment string // path of the segment file
	Offset  int64  // byte offset of the damaged record in the segment
	Reason  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: corrupt log: %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
