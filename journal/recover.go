package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Recovery states.
const (
	RecoveryMoved      = "moved"      // moved aside to Evidence at this open
	RecoveryEarlier    = "earlier"    // moved aside by an earlier open; known from Evidence
	RecoveryUnrepaired = "unrepaired" // found by a read-only open and left in place
)

// Recovery is one torn tail: the bytes of an incomplete, checksum-failing or
// undecodable last record (and anything non-zero after it) that were moved
// to an evidence file beside the segment.
type Recovery struct {
	Segment  string `json:"segment"`            // segment file name
	Offset   int64  `json:"offset"`             // where the torn record started; the log now ends there
	Bytes    int64  `json:"bytes"`              // torn bytes moved aside
	Reason   string `json:"reason,omitempty"`   // why the record was bad (this open only)
	Evidence string `json:"evidence,omitempty"` // evidence file name in the journal directory
	State    string `json:"state"`              // RecoveryMoved, RecoveryEarlier or RecoveryUnrepaired
}

// evidenceName is "<segment>.torn-<offset>", with ".<k>" for the k-th
// distinct tear at the same place.
func evidenceName(segment string, offset int64, k int) string {
	name := segment + tornInfix + strconv.FormatInt(offset, 10)
	if k > 1 {
		name += "." + strconv.Itoa(k)
	}
	return name
}

// moveAside writes the torn bytes to an evidence file (fsync'd, directory
// fsync'd) and only then zeroes them in the segment (fdatasync'd), so that
// a crash in between repeats the recovery with the same evidence instead of
// losing it.
func (j *Journal) moveAside(t *tornTail) (Recovery, error) {
	var name string
	for k := 1; ; k++ {
		cand := evidenceName(t.segment, t.offset, k)
		old, err := os.ReadFile(filepath.Join(j.dir, cand))
		if errors.Is(err, fs.ErrNotExist) {
			name = cand
			if err := writeEvidence(j.dir, cand, t.data); err != nil {
				return Recovery{}, err
			}
			break
		}
		if err != nil {
			return Recovery{}, fmt.Errorf("journal: read evidence file: %w", err)
		}
		if bytes.Equal(old, t.data) {
			// Written by an open that crashed before zeroing the segment.
			name = cand
			break
		}
	}
	if err := zeroRange(j.seg, t.offset, t.end); err != nil {
		return Recovery{}, fmt.Errorf("journal: zero torn tail of %s: %w", j.segPath, err)
	}
	if err := unix.Fdatasync(int(j.seg.Fd())); err != nil {
		return Recovery{}, fmt.Errorf("journal: fdatasync %s: %w", j.segPath, err)
	}
	j.log.Warn("journal: torn tail moved aside; the log ends at the last good record",
		"dir", j.dir, "segment", t.segment, "offset", t.offset, "bytes", len(t.data),
		"reason", t.reason, "evidence", name)
	return Recovery{Segment: t.segment, Offset: t.offset, Bytes: int64(len(t.data)),
		Reason: t.reason, Evidence: name, State: RecoveryMoved}, nil
}

func writeEvidence(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: create evidence file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("journal: write evidence file %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: fsync evidence file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("journal: close evidence file %s: %w", path, err)
	}
	return syncDir(dir)
}

// zeroRange writes zeros over [lo, hi) of f.
func zeroRange(f *os.File, lo, hi int64) error {
	zeros := make([]byte, min(hi-lo, 1<<20))
	for lo < hi {
		n := min(int64(len(zeros)), hi-lo)
		if _, err := f.WriteAt(zeros[:n], lo); err != nil {
			return err
		}
		lo += n
	}
	return nil
}

// earlierRecoveries describes the evidence files in dir other than skip.
func earlierRecoveries(dir string, names []string, skip string) ([]Recovery, error) {
	sort.Strings(names)
	var out []Recovery
	for _, name := range names {
		if name == skip {
			continue
		}
		i := strings.Index(name, tornInfix)
		offStr := name[i+len(tornInfix):]
		if k := strings.IndexByte(offStr, '.'); k >= 0 {
			offStr = offStr[:k]
		}
		off, err := strconv.ParseInt(offStr, 10, 64)
		if err != nil {
			off = -1 // not named by us; still reported, it sits beside the log
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("journal: stat evidence file: %w", err)
		}
		out = append(out, Recovery{Segment: name[:i], Offset: off, Bytes: fi.Size(), Evidence: name, State: RecoveryEarlier})
	}
	return out, nil
}
