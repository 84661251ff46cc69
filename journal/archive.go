package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Archived describes an archive: a directory holding the segments of
// records First to Last, each cut to its last record, and a manifest that
// says what they are. Archive returns it; Archive.Archived (OpenArchive)
// reads it back.
type Archived struct {
	// Dir is the archive's directory and Name its base name, which the
	// live journal's base (and ErrArchived) names it by.
	Dir  string
	Name string
	// First and Last are the records it holds. Prev is the head before
	// First (32 zero bytes when First is 1, else the end of the archive
	// before it) and Head the hash of record Last's payload, which the
	// live journal's first record (or the next archive) chains on.
	First, Last uint64
	Prev, Head  [32]byte
	// The binding in force at Last.
	Owner, Format string
	Binding       [32]byte
	// Segments are its segment files, in order.
	Segments []ArchivedSegment
	// Manifest is the SHA-256 of the manifest's body, which the base
	// records, so that the live journal names this archive exactly.
	Manifest [32]byte
}

// ArchivedSegment is one segment file of an archive.
type ArchivedSegment struct {
	Name        string
	First, Last uint64
	Bytes       int64
	SHA256      [32]byte
}

// archivePlan is what one Archive does: copy segs (the live segments
// from the log's start through the last one wholly before the mark), whose
// chain starts at from, and go on at next, the first segment kept.
type archivePlan struct {
	dir  string // the archive directory, absolute
	segs []segment
	from point
	to   point // after the last record of segs, once verified
	next segment
	base *baseBody // the base in force, nil for none
}

// Archive moves the segments wholly before the mark before (a point of
// this log, such as a snapshot's mark) out of the live directory into a
// new archive directory dir, as the package documentation says ("Archiving
// and the base"): it verifies the segments, copies them with a manifest
// into dir and verifies the copy, writes the live directory's base (the
// log starts after the archive's last record, with its head), and only
// then removes the segments. A crash anywhere leaves the old journal or
// the new one, and Archive called again completes it. The segment the
// mark is in is kept, unless the mark is its last record and another
// follows it.
//
// Refusals change nothing: a read-only or stopped journal; a mark that is
// not a point of this log or is past its durable end (ErrMarkMismatch);
// a mark in the first segment or at the base (ErrNothingToArchive); a mark
// already archived (ErrArchived); dir inside the journal, or holding
// anything but an empty directory or the archive an interrupted call of
// the same Archive made (ErrArchiveDirInUse). Appends, ReadAt and Iterate
// go on meanwhile; once the base is written, records before it are
// ErrArchived. One Archive runs at a time.
func (j *Journal) Archive(dir string, before Mark) (Archived, error) {
	j.archiveMu.Lock()
	defer j.archiveMu.Unlock()
	dir, err := j.archiveDir(dir)
	if err != nil {
		return Archived{}, err
	}
	j.mu.Lock()
	err = j.usable()
	base, leftover, lastSeq := j.base, j.leftover, j.lastSeq
	segs := append([]segment(nil), j.segs...)
	j.mu.Unlock()
	if err != nil {
		return Archived{}, err
	}
	var finished *Archived
	if len(leftover) > 0 {
		if finished, err = j.finishRemoval(dir, base, leftover); err != nil {
			return Archived{}, err
		}
	}
	p, err := j.planArchive(dir, &before, base, segs, lastSeq)
	if errors.Is(err, ErrNothingToArchive) && finished != nil && finished.Dir == dir {
		return *finished, nil
	}
	if err != nil {
		return Archived{}, err
	}
	if err := j.verifyPlan(p); err != nil {
		return Archived{}, err
	}
	a, err := j.makeArchive(p)
	if err != nil {
		return Archived{}, err
	}
	if err := j.writeBase(p, a); err != nil {
		return Archived{}, err
	}
	var names []string
	for _, s := range p.segs {
		names = append(names, s.name)
	}
	if err := j.removeArchived(names); err != nil {
		return Archived{}, err
	}
	j.log.Info("journal: archived", "dir", j.dir, "archive", a.Dir, "first", a.First, "last", a.Last, "segments", len(a.Segments))
	return a, nil
}

// archiveDir is dir made absolute, refused inside the journal directory.
func (j *Journal) archiveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("journal: archive directory %q: %w", dir, err)
	}
	live, err := filepath.Abs(j.dir)
	if err != nil {
		return "", fmt.Errorf("journal: %s: %w", j.dir, err)
	}
	if rel, err := filepath.Rel(live, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("journal: archive directory %s is inside the journal %s: %w", abs, live, ErrArchiveDirInUse)
	}
	if filepath.Base(abs) == "" || filepath.Dir(abs) == abs {
		return "", fmt.Errorf("journal: %s cannot be an archive directory: %w", abs, ErrArchiveDirInUse)
	}
	return abs, nil
}

// archiveMismatch is the error of a mark Archive does not take.
func (j *Journal) archiveMismatch(m *Mark) func(string) error {
	return func(reason string) error {
		return fmt.Errorf("journal: %s: archive before the mark at seq %d: the mark does not match: %s (nothing archived): %w",
			j.dir, m.Seq, reason, ErrMarkMismatch)
	}
}

// planArchive checks the mark against the log and picks the segments
// wholly before it.
func (j *Journal) planArchive(dir string, m *Mark, base *baseBody, segs []segment, lastSeq uint64) (*archivePlan, error) {
	mismatch := j.archiveMismatch(m)
	if m.Seq > lastSeq {
		return nil, mismatch(fmt.Sprintf("seq %d is past the durable end of the log (seq %d)", m.Seq, lastSeq))
	}
	if reason := m.inconsistency(); reason != "" {
		return nil, mismatch(reason)
	}
	if m.Owner != j.owner || m.Format != j.format {
		return nil, mismatch(fmt.Sprintf("it names owner %q and format %q, the log %q and %q", m.Owner, m.Format, j.owner, j.format))
	}
	p := &archivePlan{dir: dir, base: base, from: point{Head: make([]byte, hashSize)}}
	if base != nil {
		p.from = base.At
		switch {
		case m.Seq < base.At.Seq:
			return nil, &ArchivedError{Seq: m.Seq, Archive: base.archiveFor(m.Seq).Name, msg: fmt.Sprintf("journal: %s: archive before the mark at seq %d: it is archived in %s already (the log here starts at seq %d)",
				j.dir, m.Seq, base.archiveFor(m.Seq).Name, base.At.Seq+1)}
		case m.Seq == base.At.Seq && !bytes.Equal(m.Head, base.At.Head):
			return nil, mismatch("it is at the base, but its head is not the base's")
		case m.Seq == base.At.Seq:
			return nil, fmt.Errorf("journal: %s: archive before the mark at seq %d: it is the base, everything before it is archived: %w", j.dir, m.Seq, ErrNothingToArchive)
		}
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first >= m.Segment })
	if i == len(segs) || segs[i].first != m.Segment {
		return nil, mismatch(fmt.Sprintf("its segment %s is not in the directory", segName(m.Segment)))
	}
	if i+1 < len(segs) && segs[i+1].first <= m.Seq {
		return nil, mismatch(fmt.Sprintf("segment %s starts within the mark's segment", segs[i+1].name))
	}
	if err := j.checkMarkFrame(segs[i], m, mismatch); err != nil {
		return nil, err
	}
	k := i
	if i+1 < len(segs) && segs[i+1].first == m.Seq+1 {
		k = i + 1 // the mark ends its segment: that one is wholly before it too
	}
	if k == 0 {
		return nil, fmt.Errorf("journal: %s: archive before the mark at seq %d: no whole segment precedes it (it is in %s, the first the log has here): %w",
			j.dir, m.Seq, segs[0].name, ErrNothingToArchive)
	}
	p.segs, p.next = segs[:k], segs[k]
	return p, nil
}

// checkMarkFrame checks that the mark is a point of the log in seg.
func (j *Journal) checkMarkFrame(seg segment, m *Mark, mismatch func(string) error) error {
	f, err := os.OpenFile(filepath.Join(j.dir, seg.name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	return verifyMarkFrame(f, seg.name, m, mismatch)
}

// verifyPlan verifies the segments to archive as Open verifies a log
// (every frame, the sequence, the chain, bind and rebind records) from
// the plan's start, and that the first segment kept chains on them: the
// archive will be exactly the log's first records. It fills their ends
// (where their last frame ends) and the plan's end point.
func (j *Journal) verifyPlan(p *archivePlan) error {
	ch := p.from.chain()
	for i := range p.segs {
		if err := scanFile(j.dir, &p.segs[i], &ch, -1); err != nil {
			return err
		}
	}
	p.to = pointOf(&ch, j.segmentSize)
	path := filepath.Join(j.dir, p.next.name)
	rec, err := firstRecord(path)
	if err != nil {
		return err
	}
	if rec.Seq != ch.next || !bytes.Equal(rec.Prev, ch.prev[:]) {
		return &CorruptError{Segment: path, Offset: 0,
			Reason: fmt.Sprintf("record %d does not chain on record %d, the last of the segments to archive", rec.Seq, ch.next-1)}
	}
	return nil
}

// scanFile verifies the segment file seg of dir from its start, going
// on from ch, up to limit (the file's end when negative); every frame
// there must be whole.
func scanFile(dir string, seg *segment, ch *chain, limit int64) error {
	f, err := os.OpenFile(filepath.Join(dir, seg.name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	seg.records, seg.last, seg.end = 0, 0, 0
	s := &scanner{dir: dir, f: f, seg: seg, ch: ch, mode: scanInner}
	if _, err := s.scan(limit); err != nil {
		return err
	}
	if seg.records == 0 {
		return s.corrupt(0, "segment holds no records")
	}
	return nil
}

// firstRecord reads and decodes the first frame of the segment at path.
func firstRecord(path string) (Record, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Record{}, fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	var hdr [headerSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return Record{}, fmt.Errorf("journal: read %s: %w", path, err)
	}
	n := int64(hdr[0]) | int64(hdr[1])<<8 | int64(hdr[2])<<16 | int64(hdr[3])<<24
	if n == 0 || n > MaxRecordBytes {
		return Record{}, &CorruptError{Segment: path, Reason: fmt.Sprintf("first record of length %d", n)}
	}
	buf := make([]byte, headerSize+n)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return Record{}, fmt.Errorf("journal: read %s: %w", path, err)
	}
	var scratch []byte
	rec, _, _, err := decodeFrame(buf, &scratch)
	if err != nil {
		return Record{}, &CorruptError{Segment: path, Reason: err.Error()}
	}
	return rec, nil
}

// finishRemoval removes the segments a base archived that an interrupted
// Archive left, once the archive that holds them verifies (in dir, when
// dir holds it, else where it was made). It returns that archive.
func (j *Journal) finishRemoval(dir string, base *baseBody, leftover []string) (*Archived, error) {
	ref := base.Archives[len(base.Archives)-1]
	var a *Archive
	var err error
	for _, d := range []string{dir, ref.Dir} {
		if a, err = OpenArchive(d); err == nil && bytes.Equal(a.digest[:], ref.Manifest) {
			break
		}
		if err == nil {
			err = fmt.Errorf("journal: archive %s is not the one the base names (manifest %x, not %x)", d, a.digest, ref.Manifest)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %s: segments %s were archived in %s, which does not verify, so they are kept: %w",
			j.dir, strings.Join(leftover, ", "), ref.Name, err)
	}
	if err := j.removeArchived(leftover); err != nil {
		return nil, err
	}
	out := a.Archived()
	return &out, nil
}

// removeArchived removes segments the base names as archived, oldest
// first, and fsyncs the directory.
func (j *Journal) removeArchived(names []string) error {
	j.mu.Lock()
	j.leftover = append([]string(nil), names...)
	j.mu.Unlock()
	for i, name := range names {
		if err := os.Remove(filepath.Join(j.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("journal: remove archived segment: %w", err)
		}
		j.mu.Lock()
		j.leftover = j.leftover[1:]
		j.mu.Unlock()
		if i == 0 {
			failpointHit(FailArchiveRemoving)
		}
	}
	return syncDir(j.dir)
}
