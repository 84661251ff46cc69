package journal

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
)

// Base is where the live directory of a journal starts once Archive moved
// its first segments out: the log there starts at Seq+1, whose record's
// prev is Head, and Archives, oldest first, hold records 1 to Seq.
type Base struct {
	// Seq is the last archived record and Head its payload's hash, the
	// head the last archive's manifest ends at.
	Seq  uint64
	Head [32]byte
	// Archives are the archives that hold records 1 to Seq, oldest
	// first, as Archive made them.
	Archives []ArchiveRef
	// Leftover are segments the base archived that are still in the live
	// directory: an Archive was stopped before it removed them. Open
	// reads none of them; Archive removes them first.
	Leftover []string
}

// ArchiveRef is one archive as the base names it.
type ArchiveRef struct {
	// Name is the archive directory's base name (what ErrArchived
	// names) and Dir its absolute path when it was made.
	Name string
	Dir  string
	// First and Last are the records it holds; Manifest is the SHA-256
	// its manifest must have (Archived.Manifest).
	First, Last uint64
	Manifest    [32]byte
}

// BaseSummary is Base as Summary shows it.
type BaseSummary struct {
	Seq      uint64              `json:"seq"`
	Head     string              `json:"head"`
	Archives []ArchiveRefSummary `json:"archives"`
	Leftover []string            `json:"leftover,omitempty"`
}

// ArchiveRefSummary is ArchiveRef as Summary shows it.
type ArchiveRefSummary struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`
	First    uint64 `json:"first_seq"`
	Last     uint64 `json:"last_seq"`
	Manifest string `json:"manifest"`
}

// Base returns the journal's base, and false when its log starts at
// record 1 (nothing was archived).
func (j *Journal) Base() (Base, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.base == nil {
		return Base{}, false
	}
	b := Base{Seq: j.base.At.Seq, Head: [32]byte(j.base.At.Head), Leftover: append([]string(nil), j.leftover...)}
	for _, a := range j.base.Archives {
		b.Archives = append(b.Archives, ArchiveRef{Name: a.Name, Dir: a.Dir, First: a.First, Last: a.Last, Manifest: [32]byte(a.Manifest)})
	}
	return b, true
}

// baseSummary is the base as Summary shows it, nil without one. Called
// with mu held.
func (j *Journal) baseSummary() *BaseSummary {
	if j.base == nil {
		return nil
	}
	s := &BaseSummary{Seq: j.base.At.Seq, Head: hex.EncodeToString(j.base.At.Head), Leftover: append([]string(nil), j.leftover...)}
	for _, a := range j.base.Archives {
		s.Archives = append(s.Archives, ArchiveRefSummary{Name: a.Name, Dir: a.Dir, First: a.First, Last: a.Last,
			Manifest: hex.EncodeToString(a.Manifest)})
	}
	return s
}

// firstSeq is the first record the live directory holds (1 without a
// base). Called with mu held.
func (j *Journal) firstSeq() uint64 {
	if j.base == nil {
		return 1
	}
	return j.base.At.Seq + 1
}

// archivedLocked is the error for reading seq when it is archived, else
// nil. Called with mu held.
func (j *Journal) archivedLocked(seq uint64) error {
	if j.base == nil || seq > j.base.At.Seq {
		return nil
	}
	a := j.base.archiveFor(seq)
	return &ArchivedError{Seq: seq, Archive: a.Name, msg: fmt.Sprintf("journal: %s: seq %d is archived in %s (seq %d to %d; the log here starts at seq %d)",
		j.dir, seq, a.Name, a.First, a.Last, j.base.At.Seq+1)}
}

// startAtBase reads the directory's base, if any, into l: the segments
// it archived are left out of segs (and listed as leftovers), and the
// scan starts from its chain state. A From mark at the base goes on from
// the base itself; one before it is archived. A replay from record 1
// (OnRecord without From) is refused: the live directory no longer has
// the records before the base.
func (j *Journal) startAtBase(l *loaded, p *loadPlan, segs []segment) ([]segment, error) {
	b, err := readBase(j.dir)
	if err != nil || b == nil {
		return segs, err
	}
	l.base = b
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first > b.At.Seq })
	for _, s := range segs[:i] {
		l.leftover = append(l.leftover, s.name)
	}
	segs = segs[i:]
	if len(segs) == 0 || segs[0].first != b.At.Seq+1 {
		return nil, &CorruptError{Segment: filepath.Join(j.dir, segName(b.At.Seq+1)),
			Reason: fmt.Sprintf("the base starts the log after seq %d, but there is no segment for seq %d", b.At.Seq, b.At.Seq+1)}
	}
	switch m := p.from; {
	case m != nil && m.Seq <= b.At.Seq:
		if err := j.fromAtBase(m, b); err != nil {
			return nil, err
		}
		p.from, j.fromBase = nil, true
	case m == nil && j.opts.OnRecord != nil && j.opts.ReplayArchives:
		if err := j.handArchives(b); err != nil {
			return nil, err
		}
	case m == nil && j.opts.OnRecord != nil:
		first := b.Archives[0]
		return nil, &ArchivedError{Seq: 1, Archive: first.Name, msg: fmt.Sprintf("journal: %s: records 1 to %d are archived in %s and the archives after it: a replay from record 1 (OnRecord without From) needs them; open from a mark at seq %d or later",
			j.dir, b.At.Seq, first.Name, b.At.Seq)}
	}
	l.ch = b.At.chain()
	return segs, nil
}

// fromAtBase checks a From mark at or before the base: one at the base
// must be the base's own point; one before it is archived.
func (j *Journal) fromAtBase(m *Mark, b *baseBody) error {
	if m.Seq < b.At.Seq {
		return &ArchivedError{Seq: m.Seq, Archive: b.archiveFor(m.Seq).Name, mark: true, msg: fmt.Sprintf("journal: %s: the mark at seq %d does not match: it is archived in %s (the log here starts at seq %d; open from a later mark)",
			j.dir, m.Seq, b.archiveFor(m.Seq).Name, b.At.Seq+1)}
	}
	var reason string
	switch {
	case !bytes.Equal(m.Head, b.At.Head):
		reason = "its head is not the base's"
	case m.Owner != b.At.Owner || m.Format != b.At.Format:
		reason = fmt.Sprintf("the base names owner %q and format %q", b.At.Owner, b.At.Format)
	case !bytes.Equal(m.Config, b.At.Config) || m.Rebinds != b.At.Rebinds:
		reason = "the base has another binding"
	case m.SegmentSize != b.At.SegmentSize:
		reason = fmt.Sprintf("the base's segment size is %d", b.At.SegmentSize)
	}
	if reason != "" {
		return markMismatch(j.dir, m, "it is at the base, but "+reason)
	}
	return nil
}

// handArchives hands OnRecord the records of the archives base b names,
// oldest first, for a replay from record 1 (Options.ReplayArchives): each
// opened where it was made and verified whole (OpenArchive), the one the
// base names by its manifest's digest, chained on the one before, the
// last ending at the base's head. What an earlier attempt of this Open
// handed is not handed again. An archive that does not open, or is not
// the one the base names, fails the Open naming it.
func (j *Journal) handArchives(b *baseBody) error {
	var prev [hashSize]byte
	for _, ref := range b.Archives {
		a, err := OpenArchive(ref.Dir)
		if err != nil {
			return fmt.Errorf("journal: %s: records %d to %d are archived in %s, which does not open, and a replay from record 1 needs them: %w", j.dir, ref.First, ref.Last, ref.Name, err)
		}
		ad := a.Archived()
		switch {
		case !bytes.Equal(ad.Manifest[:], ref.Manifest):
			return &CorruptError{Segment: ref.Dir, Reason: fmt.Sprintf("the archive is not the %s the base names: its manifest's digest is %x, the base's %x", ref.Name, ad.Manifest, ref.Manifest)}
		case ad.Prev != prev:
			return &CorruptError{Segment: ref.Dir, Reason: "the archive does not chain on the archive before it"}
		}
		if err := j.bindingError(j.ownerProblem(ad.Owner, ad.Format)); err != nil {
			return err
		}
		prev = ad.Head
		if ad.Last <= j.handed.seq {
			continue
		}
		err = a.Iterate(0, func(r Record) error {
			if r.Seq <= j.handed.seq {
				return nil
			}
			if err := j.opts.OnRecord(r); err != nil {
				return &handError{err}
			}
			j.handed.seq = r.Seq
			return nil
		})
		if err != nil {
			return err
		}
		j.handed.head, j.handed.checked = ad.Head, true
	}
	if !bytes.Equal(prev[:], b.At.Head) {
		return &CorruptError{Segment: filepath.Join(j.dir, baseFileName), Reason: "the last archive does not end at the head the base starts from"}
	}
	return nil
}
