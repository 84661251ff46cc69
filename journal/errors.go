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
)

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
