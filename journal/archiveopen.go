package journal

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Archive is an archive directory Archive made, opened and verified by
// OpenArchive; it is read-only and holds no file open.
type Archive struct {
	dir    string
	m      manifestBody
	digest [hashSize]byte
	segs   []segment
}

// OpenArchive opens the archive in dir read-only and verifies all of it:
// the manifest's digest and fields, that the directory holds exactly its
// segments with the sizes and SHA-256 it records, and every record as
// Open verifies a log (frames, sequence, hash chain, bind and rebind
// records), from the chain state before its first record to the head and
// binding its manifest ends at. Damage is a *CorruptError naming the file.
//
// Its Archived().Prev is the head it starts from and Head the one it ends
// at: a consumer checks that an archive's Head is the next archive's Prev
// and that the last one's is the live journal's Base().Head, so that the
// archives and the live log are one chain.
func OpenArchive(dir string) (*Archive, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: archive %q: %w", dir, err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return nil, fmt.Errorf("journal: archive: %w", err)
	}
	if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("journal: archive %s is not a directory", abs)
	}
	a := &Archive{dir: abs}
	path := filepath.Join(abs, manifestFileName)
	b, err := readSmall(path)
	if err != nil {
		return nil, fmt.Errorf("journal: archive %s: read its manifest: %w", abs, err)
	}
	reason := ""
	if a.digest, err = unseal(b, &a.m); err != nil {
		reason = err.Error()
	} else {
		reason = a.m.inconsistency()
	}
	if reason != "" {
		return nil, &CorruptError{Segment: path, Reason: "the archive's manifest: " + reason}
	}
	if err := a.checkListing(); err != nil {
		return nil, err
	}
	if err := a.verify(); err != nil {
		return nil, err
	}
	return a, nil
}

// inconsistency says how the manifest's fields disagree, or "".
func (m *manifestBody) inconsistency() string {
	switch {
	case m.Version != manifestVersion:
		return fmt.Sprintf("version %q, not %q", m.Version, manifestVersion)
	case len(m.Segments) == 0 || m.To.Seq <= m.From.Seq:
		return fmt.Sprintf("it holds no record (seq %d to %d, %d segments)", m.From.Seq+1, m.To.Seq, len(m.Segments))
	}
	if r := m.From.inconsistency(); r != "" {
		return "from: " + r
	}
	if r := m.To.inconsistency(); r != "" {
		return "to: " + r
	}
	next := m.From.Seq + 1
	for _, s := range m.Segments {
		if s.Name != segName(s.First) || s.First != next || s.Last < s.First || s.Bytes < minFrame ||
			s.Bytes > MaxSegmentSize+headerSize+MaxRecordBytes || len(s.SHA256) != hashSize {
			return fmt.Sprintf("segment %q of seq %d to %d (%d bytes) does not go on at seq %d", s.Name, s.First, s.Last, s.Bytes, next)
		}
		next = s.Last + 1
	}
	if next != m.To.Seq+1 {
		return fmt.Sprintf("its segments end at seq %d, not at seq %d", next-1, m.To.Seq)
	}
	return ""
}

// checkListing checks that the directory holds the manifest's segments
// and no other.
func (a *Archive) checkListing() error {
	ls, err := listDir(a.dir)
	if err != nil {
		return err
	}
	if len(ls.tmps) > 0 {
		return &CorruptError{Segment: filepath.Join(a.dir, ls.tmps[0]), Reason: "an unfinished segment in an archive"}
	}
	want := map[string]bool{}
	for _, s := range a.m.Segments {
		want[s.Name] = true
	}
	for _, s := range ls.segs {
		if !want[s.name] {
			return &CorruptError{Segment: filepath.Join(a.dir, s.name), Reason: "a segment the archive's manifest does not list"}
		}
		delete(want, s.name)
	}
	for _, s := range a.m.Segments {
		if want[s.Name] {
			return &CorruptError{Segment: filepath.Join(a.dir, s.Name), Reason: "the archive's manifest lists it, but it is not there"}
		}
	}
	return nil
}

// verify checks every segment's size and SHA-256, then its records, from
// the manifest's From to its To.
func (a *Archive) verify() error {
	ch := a.m.From.chain()
	for _, s := range a.m.Segments {
		path := filepath.Join(a.dir, s.Name)
		size, sum, err := hashFile(path)
		if err != nil {
			return err
		}
		if size != s.Bytes || !bytes.Equal(sum[:], s.SHA256) {
			return &CorruptError{Segment: path, Reason: fmt.Sprintf("%d bytes with SHA-256 %x; the manifest says %d bytes with %x", size, sum, s.Bytes, s.SHA256)}
		}
		seg := segment{name: s.Name, first: s.First}
		if err := scanFile(a.dir, &seg, &ch, -1); err != nil {
			return err
		}
		if seg.last != s.Last || seg.end != s.Bytes {
			return &CorruptError{Segment: path, Offset: seg.end, Reason: fmt.Sprintf("it holds seq %d to %d in %d bytes; the manifest says to %d in %d",
				s.First, seg.last, seg.end, s.Last, s.Bytes)}
		}
		a.segs = append(a.segs, seg)
	}
	to := pointOf(&ch, a.m.To.SegmentSize)
	if !bytes.Equal(to.Head, a.m.To.Head) || to.Owner != a.m.To.Owner || to.Format != a.m.To.Format ||
		!bytes.Equal(to.Config, a.m.To.Config) || to.Rebinds != a.m.To.Rebinds {
		return &CorruptError{Segment: filepath.Join(a.dir, manifestFileName),
			Reason: fmt.Sprintf("the records end at seq %d with head %x, not with the head and binding the manifest says (%x)", to.Seq, to.Head, a.m.To.Head)}
	}
	return nil
}

// hashFile returns the size and SHA-256 of the file at path.
func hashFile(path string) (int64, [hashSize]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, [hashSize]byte{}, fmt.Errorf("journal: open archived segment: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, [hashSize]byte{}, fmt.Errorf("journal: read %s: %w", path, err)
	}
	return n, [hashSize]byte(h.Sum(nil)), nil
}

// Archived describes the archive as its manifest says (which OpenArchive
// verified).
func (a *Archive) Archived() Archived {
	m := &a.m
	out := Archived{Dir: a.dir, Name: filepath.Base(a.dir), First: m.From.Seq + 1, Last: m.To.Seq,
		Prev: [32]byte(m.From.Head), Head: [32]byte(m.To.Head), Owner: m.To.Owner, Format: m.To.Format,
		Binding: sha256.Sum256(m.To.Config), Manifest: a.digest}
	for _, s := range m.Segments {
		out.Segments = append(out.Segments, ArchivedSegment{Name: s.Name, First: s.First, Last: s.Last, Bytes: s.Bytes, SHA256: [32]byte(s.SHA256)})
	}
	return out
}

// Iterate calls fn for every record of the archive from seq from (its
// first when from is 0) to its last, in order, each with its Place in the
// archive, reading the segments again and checking each frame's checksum,
// sequence and hash link as Journal.Iterate does. A from before the
// archive's first record is an error; one past its last, no call. An error
// from fn stops the iteration and is returned as is.
func (a *Archive) Iterate(from uint64, fn func(Record) error) error {
	first, last := a.m.From.Seq+1, a.m.To.Seq
	if from == 0 {
		from = first
	}
	if from < first {
		return fmt.Errorf("journal: archive %s holds seq %d to %d, not seq %d", a.dir, first, last, from)
	}
	if from > last {
		return nil
	}
	i := sort.Search(len(a.segs), func(i int) bool { return a.segs[i].first > from }) - 1
	it := iterator{dir: a.dir, from: from, last: last, fn: fn}
	for ; i < len(a.segs); i++ {
		if err := it.segment(a.segs[i], a.segs[i].last+1); err != nil {
			return err
		}
	}
	return nil
}
