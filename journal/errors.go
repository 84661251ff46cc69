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

	// ErrArchived is matched by the error of ReadAt, Iterate and Open for
	// records that Archive moved out of the live directory: the error
	// names the archive that holds them (see Journal.Base). An Open from
	// a mark before the base matches ErrMarkMismatch too.
	ErrArchived = errors.New("journal: archived")

	// ErrNothingToArchive is returned by Archive when no whole segment
	// precedes the mark's (the mark is in the log's first segment, or at
	// its base): nothing is written.
	ErrNothingToArchive = errors.New("journal: nothing to archive")

	// ErrArchiveDirInUse is returned by Archive when the archive
	// directory holds files that are not the archive it would make (an
	// archive goes into a new or empty directory; an interrupted
	// Archive's own archive is taken up again). Nothing is written.
	ErrArchiveDirInUse = errors.New("journal: archive directory in use")
)

// ArchivedError is the error (matching ErrArchived) of a read of a
// record Archive moved out of the live directory: Archive is the name of
// the archive that holds record Seq (its directory's base name), so that
// an owner can refuse a request for it in a line of its own. At an Open
// from a mark before the base it matches ErrMarkMismatch too.
type ArchivedError struct {
	Seq     uint64
	Archive string
	msg     string
	mark    bool
}

func (e *ArchivedError) Error() string { return e.msg }

// Unwrap makes errors.Is(err, ErrArchived) true, and ErrMarkMismatch for
// a From mark.
func (e *ArchivedError) Unwrap() []error {
	if e.mark {
		return []error{ErrArchived, ErrMarkMismatch}
	}
	return []error{ErrArchived}
}

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

// RefusedArchive reports whether err, an error of Archive, is one of its
// refusals, each of which wrote nothing: nothing to archive
// (ErrNothingToArchive), the directory in use (ErrArchiveDirInUse), a
// mark that is not a durable point of this log (ErrMarkMismatch), a mark
// already archived (ErrArchived). An owner answers these as refused
// input, and any other error as a failure.
func RefusedArchive(err error) bool {
	for _, e := range []error{ErrNothingToArchive, ErrArchiveDirInUse, ErrMarkMismatch, ErrArchived} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
