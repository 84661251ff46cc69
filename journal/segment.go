package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	segSuffix    = ".seg"
	segDigits    = 16
	tmpSuffix    = ".tmp"
	tornInfix    = ".torn-"
	lockFileName = "lock"
)

// DefaultSegmentSize is the preallocated size of a segment when
// Options.SegmentSize is 0.
const DefaultSegmentSize = 64 << 20

// MaxSegmentSize bounds Options.SegmentSize and the size a bind record
// records: every open preallocates the last segment to it, and the tail of
// a segment is scanned at open, so a larger one costs disk and start time
// for nothing a journal needs.
const MaxSegmentSize = 1 << 30

// segment is what Open learned about one segment file.
type segment struct {
	name    string // file name, e.g. 0000000000000001.seg
	first   uint64 // first seq, from the name
	last    uint64 // last seq stored, 0 if none
	records uint64
	end     int64 // offset just past the last record
	size    int64 // file size
}

func segName(first uint64) string {
	return fmt.Sprintf("%0*d%s", segDigits, first, segSuffix)
}

// parseSegName returns the first seq of a segment file name, or ok=false
// for a name that is not a segment's.
func parseSegName(name string) (uint64, bool) {
	if len(name) != segDigits+len(segSuffix) || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	digits := name[:segDigits]
	for i := 0; i < len(digits); i++ {
		if c := digits[i]; c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// syncDir fsyncs a directory so that entries created or renamed in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: open directory for fsync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: fsync directory %s: %w", dir, err)
	}
	return nil
}

// preallocate reserves size bytes for f (fallocate mode 0: allocated,
// zero-reading, file size set), so that appends into it change no size.
// On a filesystem without fallocate it extends the file sparsely instead,
// says so and reports sparse: appends into it allocate blocks and can fail
// for want of space.
func preallocate(f *os.File, size int64, log *slog.Logger) (sparse bool, err error) {
	err = faultPoint("fallocate")
	if err == nil {
		err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		log.Warn("journal: fallocate not supported; segment extended sparsely, appends will allocate blocks",
			"segment", f.Name(), "size", size)
		sparse, err = true, f.Truncate(size)
	}
	if err != nil {
		return sparse, fmt.Errorf("journal: preallocate %s to %d bytes: %w", f.Name(), size, err)
	}
	return sparse, nil
}

// createSegment creates the segment file for first seq, preallocated to
// size, and makes its name durable: it is prepared under a temporary name,
// fsync'd, renamed into place (never over an existing file) and the
// directory is fsync'd. A crash leaves either no segment or a complete,
// zero-filled one, and so does a failure before the rename (the temporary
// file is removed; one that cannot be is removed by the next Open, which
// never reads it as a segment). A failed directory fsync after the rename
// leaves the segment's name in an unknown state: that error is a
// *syncFailure, which stops the journal.
func createSegment(dir string, first uint64, size int64, log *slog.Logger) (f *os.File, sparse bool, err error) {
	name := filepath.Join(dir, segName(first))
	tmp := name + tmpSuffix
	// A temporary file left by an earlier failed attempt never held a
	// record; the directory is locked, so it is ours.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("journal: remove unfinished segment: %w", err)
	}
	f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("journal: create segment: %w", err)
	}
	fail := func(err error) (*os.File, bool, error) {
		f.Close()
		os.Remove(tmp)
		return nil, false, err
	}
	if sparse, err = preallocate(f, size, log); err != nil {
		return fail(err)
	}
	err = faultPoint("segment-sync")
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fail(fmt.Errorf("journal: fsync new segment %s: %w", tmp, err))
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, name, unix.RENAME_NOREPLACE); err != nil {
		return fail(fmt.Errorf("journal: rename %s into place: %w", tmp, err))
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, false, &syncFailure{err}
	}
	return f, sparse, nil
}
