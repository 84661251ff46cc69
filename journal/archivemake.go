package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The failpoints of Archive, in its order: STEWARD_FAILPOINT=NAME (the
// variable internal/failpoint reads, which package journal cannot import)
// makes the process SIGKILL itself there, so that a test sees what a crash
// at that point leaves. Read once at start; unset, each costs one string
// comparison.
const (
	// FailArchiveCopied: the segments and the manifest are written and
	// fsync'd in the archive's temporary directory ("<dir>.partial"),
	// which is not yet renamed into place.
	FailArchiveCopied = "journal-archive-copied"
	// FailArchiveRenamed: the archive is in place, durable and verified;
	// the live directory has no base for it yet.
	FailArchiveRenamed = "journal-archive-renamed"
	// FailArchiveBaseTmp: the new base is written and fsync'd under its
	// temporary name ("base.tmp"), not yet renamed into place.
	FailArchiveBaseTmp = "journal-archive-base-tmp"
	// FailArchiveBased: the base is in place and durable; no archived
	// segment is removed yet.
	FailArchiveBased = "journal-archive-based"
	// FailArchiveRemoving: the first archived segment is removed, the
	// others not yet.
	FailArchiveRemoving = "journal-archive-removing"
)

// armedFailpoint is the failpoint STEWARD_FAILPOINT names at start.
var armedFailpoint = os.Getenv(failpointEnv)

// failpointHit kills the process with SIGKILL if name is the armed
// failpoint, as internal/failpoint.Hit does.
func failpointHit(name string) {
	if armedFailpoint != name {
		return
	}
	_ = unix.Kill(os.Getpid(), unix.SIGKILL)
	select {} // SIGKILL is not deliverable late; never return past the point.
}

// makeArchive makes the plan's archive in p.dir, or takes up the one an
// interrupted Archive made there, and returns it verified.
func (j *Journal) makeArchive(p *archivePlan) (Archived, error) {
	switch a, err := existingArchive(p); {
	case err != nil:
		return Archived{}, err
	case a != nil:
		j.log.Info("journal: taking up the archive an interrupted Archive made", "dir", j.dir, "archive", p.dir)
		return *a, nil
	}
	partial := p.dir + partialSuffix
	if err := clearPartial(partial); err != nil {
		return Archived{}, err
	}
	if err := os.Mkdir(partial, 0o700); err != nil {
		return Archived{}, fmt.Errorf("journal: create archive directory: %w", err)
	}
	if err := os.Chmod(partial, 0o700); err != nil {
		return Archived{}, fmt.Errorf("journal: chmod archive directory: %w", err)
	}
	m := manifestBody{Version: manifestVersion, From: p.from, To: p.to}
	for _, s := range p.segs {
		as, err := copySegment(j.dir, partial, s)
		if err != nil {
			return Archived{}, err
		}
		m.Segments = append(m.Segments, as)
	}
	b, digest, err := sealed(m)
	if err != nil {
		return Archived{}, fmt.Errorf("journal: encode manifest: %w", err)
	}
	if err := writeSynced(filepath.Join(partial, manifestFileName), b, 0o400); err != nil {
		return Archived{}, err
	}
	if err := syncDir(partial); err != nil {
		return Archived{}, err
	}
	failpointHit(FailArchiveCopied)
	// rename(2) replaces an empty directory and fails on any other.
	// (os.Rename refuses an existing directory; rename(2) does not.)
	if err := unix.Rename(partial, p.dir); err != nil {
		return Archived{}, fmt.Errorf("journal: rename %s into place: %v: %w", partial, err, ErrArchiveDirInUse)
	}
	if err := syncDir(filepath.Dir(p.dir)); err != nil {
		return Archived{}, err
	}
	a, err := OpenArchive(p.dir)
	if err != nil {
		return Archived{}, fmt.Errorf("journal: the archive just made does not verify (nothing removed): %w", err)
	}
	if a.digest != digest {
		return Archived{}, fmt.Errorf("journal: archive %s changed while it was made: manifest %x, not %x (nothing removed)", p.dir, a.digest, digest)
	}
	failpointHit(FailArchiveRenamed)
	return a.Archived(), nil
}

// existingArchive checks what p.dir holds: nothing (nil), or the archive
// an interrupted Archive of the same segments made (it is returned); else
// ErrArchiveDirInUse.
func existingArchive(p *archivePlan) (*Archived, error) {
	fi, err := os.Lstat(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: archive directory: %w", err)
	}
	inUse := func(format string, args ...any) (*Archived, error) {
		return nil, fmt.Errorf("journal: archive directory %s %s: %w", p.dir, fmt.Sprintf(format, args...), ErrArchiveDirInUse)
	}
	if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
		return inUse("is not a directory")
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("journal: list archive directory: %w", err)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	if _, err := os.Lstat(filepath.Join(p.dir, manifestFileName)); err != nil {
		return inUse("is not empty (it holds %s) and has no archive manifest", entries[0].Name())
	}
	a, err := OpenArchive(p.dir)
	if err != nil {
		return inUse("holds an archive that does not verify (%v)", err)
	}
	m := &a.m
	same := m.From.Seq == p.from.Seq && bytes.Equal(m.From.Head, p.from.Head) &&
		m.To.Seq == p.to.Seq && bytes.Equal(m.To.Head, p.to.Head) && len(m.Segments) == len(p.segs)
	if !same {
		return inUse("holds the archive of seq %d to %d, not this one of seq %d to %d", m.From.Seq+1, m.To.Seq, p.from.Seq+1, p.to.Seq)
	}
	out := a.Archived()
	return &out, nil
}

// clearPartial removes what an interrupted Archive left in its temporary
// directory: segment files and the manifest only, else it refuses.
func clearPartial(partial string) error {
	entries, err := os.ReadDir(partial)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %s: %v: %w", partial, err, ErrArchiveDirInUse)
	}
	for _, e := range entries {
		name := e.Name()
		if _, ok := parseSegName(name); !ok && name != manifestFileName {
			return fmt.Errorf("journal: %s holds %s, which no Archive wrote: %w", partial, name, ErrArchiveDirInUse)
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(partial, e.Name())); err != nil {
			return fmt.Errorf("journal: clear %s: %w", partial, err)
		}
	}
	if err := os.Remove(partial); err != nil {
		return fmt.Errorf("journal: clear %s: %w", partial, err)
	}
	return syncDir(filepath.Dir(partial))
}

// copySegment copies the records of the live segment s (its first
// s.end bytes) into dst, fsync'd, and says what it wrote.
func copySegment(live, dst string, s segment) (archivedSegment, error) {
	src, err := os.OpenFile(filepath.Join(live, s.name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return archivedSegment{}, fmt.Errorf("journal: open segment: %w", err)
	}
	defer src.Close()
	path := filepath.Join(dst, s.name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return archivedSegment{}, fmt.Errorf("journal: create archived segment: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), io.NewSectionReader(src, 0, s.end))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return archivedSegment{}, fmt.Errorf("journal: copy %s to %s: %w", s.name, path, err)
	}
	return archivedSegment{Name: s.name, First: s.first, Last: s.last, Bytes: s.end, SHA256: h.Sum(nil)}, nil
}

// writeBase makes the new base durable (temporary name, fsync, rename,
// directory fsync) and takes it: from then on the archived records are
// ErrArchived, and the segments are the base's leftovers until removed.
func (j *Journal) writeBase(p *archivePlan, a Archived) error {
	nb := baseBody{Version: baseVersion, At: p.to}
	if p.base != nil {
		nb.Archives = append(nb.Archives, p.base.Archives...)
	}
	nb.Archives = append(nb.Archives, archiveRef{Name: a.Name, Dir: a.Dir, First: a.First, Last: a.Last, Manifest: bytes.Clone(a.Manifest[:])})
	b, _, err := sealed(nb)
	if err != nil {
		return fmt.Errorf("journal: encode base: %w", err)
	}
	if r := nb.inconsistency(); r != "" {
		return fmt.Errorf("journal: %s: the new base would be inconsistent: %s (nothing removed)", j.dir, r)
	}
	tmp, path := filepath.Join(j.dir, baseFileName+tmpSuffix), filepath.Join(j.dir, baseFileName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: remove unfinished base: %w", err)
	}
	if err := writeSynced(tmp, b, 0o600); err != nil {
		return err
	}
	failpointHit(FailArchiveBaseTmp)
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("journal: rename %s into place: %w", tmp, err)
	}
	if err := syncDir(j.dir); err != nil {
		return err
	}
	j.mu.Lock()
	j.base, j.baseTmp = &nb, false
	if n := len(p.segs); len(j.segs) > n && j.segs[n].first == p.next.first {
		j.segs = append([]segment(nil), j.segs[n:]...)
	}
	for _, s := range p.segs {
		j.leftover = append(j.leftover, s.name)
	}
	j.mu.Unlock()
	failpointHit(FailArchiveBased)
	return nil
}
