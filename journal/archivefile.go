package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The files of retention (DESIGN.md section 13, "Retention with
// evidence"): an archive's manifest and the live directory's base. Each
// is the deterministic CBOR of its body followed by the SHA-256 of those
// bytes, which is also its digest: the base names each archive by its
// manifest's digest.
const (
	baseFileName     = "base"
	manifestFileName = "manifest"
	partialSuffix    = ".partial"
	baseVersion      = "steward-journal-base-v1"
	manifestVersion  = "steward-journal-archive-v1"
	// maxSmallFile bounds what a base or manifest file may be: one entry
	// per archive or segment, each well under a kilobyte, plus a config.
	maxSmallFile = 16 << 20
)

// point is the chain's state after record Seq (seq 0: before record 1):
// what a scan needs to go on verifying from there.
type point struct {
	Seq         uint64 `cbor:"seq"`
	Head        []byte `cbor:"head"`
	Owner       string `cbor:"owner"`
	Format      string `cbor:"format"`
	Config      []byte `cbor:"config"`
	Rebinds     int    `cbor:"rebinds"`
	SegmentSize int64  `cbor:"segmentSize"`
}

// pointOf is the state a chain reached.
func pointOf(c *chain, segmentSize int64) point {
	if c.next == 1 {
		return point{Head: make([]byte, hashSize)}
	}
	if c.segSize != 0 {
		segmentSize = c.segSize
	}
	return point{Seq: c.next - 1, Head: bytes.Clone(c.prev[:]), Owner: c.owner, Format: c.format,
		Config: bytes.Clone(c.config), Rebinds: c.rebinds, SegmentSize: segmentSize}
}

// chain is the scan state at p: records after it verify as they do after
// a full scan up to it.
func (p *point) chain() chain {
	if p.Seq == 0 {
		return newChain()
	}
	c := chain{next: p.Seq + 1, owner: p.Owner, format: p.Format, config: bytes.Clone(p.Config),
		rebinds: p.Rebinds, segSize: p.SegmentSize, binding: sha256.Sum256(p.Config)}
	copy(c.prev[:], p.Head)
	return c
}

// inconsistency says how p's fields disagree, or "".
func (p *point) inconsistency() string {
	switch {
	case len(p.Head) != hashSize:
		return fmt.Sprintf("head of %d bytes", len(p.Head))
	case p.Seq == 0:
		if !allZero(p.Head) || p.Owner != "" || p.Config != nil {
			return "seq 0 with a head or a binding"
		}
	case p.Owner == "" || p.Format == "" || len(p.Config) == 0:
		return fmt.Sprintf("seq %d without owner, format or config", p.Seq)
	case p.Rebinds < 0 || uint64(p.Rebinds) >= p.Seq:
		return fmt.Sprintf("rebinds %d at seq %d", p.Rebinds, p.Seq)
	case p.SegmentSize < 1 || p.SegmentSize > MaxSegmentSize:
		return fmt.Sprintf("segment size %d", p.SegmentSize)
	}
	return ""
}

// manifestBody is an archive's manifest: the chain before its first
// record and after its last, and its segments.
type manifestBody struct {
	Version  string            `cbor:"version"`
	From     point             `cbor:"from"`
	To       point             `cbor:"to"`
	Segments []archivedSegment `cbor:"segments"`
}

// archivedSegment is one segment file of an archive, cut to its records.
type archivedSegment struct {
	Name   string `cbor:"name"`
	First  uint64 `cbor:"first"`
	Last   uint64 `cbor:"last"`
	Bytes  int64  `cbor:"bytes"`
	SHA256 []byte `cbor:"sha256"`
}

// baseBody is the live directory's base: the log there starts after
// At.Seq, and the archives, oldest first, hold records 1 to At.Seq.
type baseBody struct {
	Version  string       `cbor:"version"`
	At       point        `cbor:"at"`
	Archives []archiveRef `cbor:"archives"`
}

// archiveRef names one archive in the base.
type archiveRef struct {
	Name     string `cbor:"name"` // the archive directory's base name
	Dir      string `cbor:"dir"`  // its absolute path when it was made
	First    uint64 `cbor:"first"`
	Last     uint64 `cbor:"last"`
	Manifest []byte `cbor:"manifest"` // SHA-256 of its manifest's body
}

// sealed is body's encoding followed by its SHA-256, and that digest.
func sealed(body any) ([]byte, [hashSize]byte, error) {
	b, err := encMode.Marshal(body)
	if err != nil {
		return nil, [hashSize]byte{}, err
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), sum, nil
}

// unseal checks a sealed file's digest and decodes its body strictly.
func unseal(b []byte, body any) ([hashSize]byte, error) {
	if len(b) <= hashSize {
		return [hashSize]byte{}, fmt.Errorf("%d bytes, too short", len(b))
	}
	data := b[:len(b)-hashSize]
	sum := sha256.Sum256(data)
	if !bytes.Equal(sum[:], b[len(b)-hashSize:]) {
		return sum, errors.New("its SHA-256 does not match its contents")
	}
	if err := decMode.Unmarshal(data, body); err != nil {
		return sum, fmt.Errorf("it does not decode: %v", err)
	}
	if again, err := encMode.Marshal(body); err != nil || !bytes.Equal(again, data) {
		return sum, errors.New("it is not in its deterministic encoding")
	}
	return sum, nil
}

// readSmall reads a file of at most maxSmallFile bytes, not a symlink.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxSmallFile {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", path, st.Size(), maxSmallFile)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// readBase reads the base of the journal in dir: nil when there is none.
// A base that is damaged or inconsistent refuses the open: the log's
// start is not known without it.
func readBase(dir string) (*baseBody, error) {
	path := filepath.Join(dir, baseFileName)
	b, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", path, err)
	}
	var base baseBody
	reason := ""
	if _, err := unseal(b, &base); err != nil {
		reason = err.Error()
	} else {
		reason = base.inconsistency()
	}
	if reason != "" {
		return nil, &CorruptError{Segment: path, Reason: "the base file: " + reason + " (the log's start is not known without it)"}
	}
	return &base, nil
}

// inconsistency says how the base's fields disagree, or "".
func (b *baseBody) inconsistency() string {
	switch {
	case b.Version != baseVersion:
		return fmt.Sprintf("version %q, not %q", b.Version, baseVersion)
	case b.At.Seq == 0:
		return "it starts the log after seq 0"
	case len(b.Archives) == 0:
		return "it names no archive"
	}
	if r := b.At.inconsistency(); r != "" {
		return r
	}
	next := uint64(1)
	for _, a := range b.Archives {
		if a.First != next || a.Last < a.First || a.Name == "" || len(a.Manifest) != hashSize {
			return fmt.Sprintf("archive %q of seq %d to %d does not go on at seq %d", a.Name, a.First, a.Last, next)
		}
		next = a.Last + 1
	}
	if next != b.At.Seq+1 {
		return fmt.Sprintf("its archives end at seq %d, not at its seq %d", next-1, b.At.Seq)
	}
	return ""
}

// archiveFor is the archive that holds seq, which is at most At.Seq.
func (b *baseBody) archiveFor(seq uint64) archiveRef {
	for _, a := range b.Archives {
		if seq <= a.Last {
			return a
		}
	}
	return b.Archives[len(b.Archives)-1]
}

// writeSynced creates path with data (0400 or 0600 as mode says), fsync'd,
// failing if it exists.
func writeSynced(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return fmt.Errorf("journal: create %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: write %s: %w", path, err)
	}
	return nil
}
