package journal

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
)

// unchanged checks that a refused Archive changed nothing: no archive
// directory, no base, the same segments.
func unchanged(t *testing.T, j *Journal, adir string, segs []string) {
	t.Helper()
	if _, err := os.Lstat(adir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Archive left %s (%v)", adir, err)
	}
	if _, err := os.Lstat(filepath.Join(j.Dir(), baseFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Archive left a base (%v)", err)
	}
	if got := liveSegments(t, j.Dir()); !reflect.DeepEqual(got, segs) {
		t.Fatalf("segments %v after a refused Archive, were %v", got, segs)
	}
	if _, ok := j.Base(); ok {
		t.Fatal("a refused Archive set a base")
	}
}

// Marks Archive refuses, each with its one line and nothing changed: one
// of another log, of another owner, one record past the durable end, one
// whose fields disagree.
func TestArchiveRefusesMarks(t *testing.T) {
	dir, opts, marks := markedLog(t)
	_, _, other := markedLog(t)
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	segs := liveSegments(t, dir)
	adir := filepath.Join(t.TempDir(), "a")
	past := marks[41]
	past.Seq = 42
	owner := marks[25]
	owner.Owner = "someone-else"
	short := marks[25]
	short.Head = short.Head[:31]
	prefix := "journal: " + dir + ": archive before the mark at seq "
	for _, c := range []struct {
		name string
		m    Mark
		want string
	}{
		{"another log's", other[25], prefix + "25: the mark does not match: no record with the mark's head ends at offset " +
			strconv.FormatInt(other[25].End, 10) + " of segment " + segName(22) + " (nothing archived): journal: mark does not match the log"},
		{"another owner's", owner, prefix + `25: the mark does not match: it names owner "someone-else" and format "steward-test-journal-v1", the log "steward-test" and "steward-test-journal-v1" (nothing archived): journal: mark does not match the log`},
		{"past the durable end", past, prefix + "42: the mark does not match: seq 42 is past the durable end of the log (seq 41) (nothing archived): journal: mark does not match the log"},
		{"a short head", short, prefix + "25: the mark does not match: its head is 31 bytes, not 32 (nothing archived): journal: mark does not match the log"},
	} {
		_, err := j.Archive(adir, c.m)
		if !errors.Is(err, ErrMarkMismatch) || err.Error() != c.want {
			t.Fatalf("%s mark:\n got %v\nwant %s", c.name, err, c.want)
		}
		unchanged(t, j, adir, segs)
	}
	// The durable end itself is a mark Archive takes.
	if a := mustArchive(t, j, adir, marks[41]); a.Last != 40 {
		t.Fatalf("archived to %d before the tail, want 40", a.Last)
	}
}

// A mark of a record that is written but not yet durable (its batch
// waits for its fdatasync) is past the durable end: Archive refuses it
// while the writer is inside that batch, and takes it once the batch is
// durable.
func TestArchiveRefusesUnflushedTail(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 600
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	for i := range 12 {
		mustAppend(t, j, "tick", tick{N: i})
	}
	inBatch, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	setHooks(t, func(point string) {
		if point == "after-write" {
			once.Do(func() { close(inBatch); <-release })
		}
	}, nil)
	done := make(chan error, 1)
	go func() { _, err := j.Append("tick", tick{N: 99}); done <- err }()
	<-inBatch
	durable := j.Mark()
	// The mark of the record being written, from its bytes on disk.
	path := filepath.Join(dir, segName(durable.Segment))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr := frames(t, path)
	lastFrame := fr[len(fr)-1]
	if lastFrame.off != durable.End {
		t.Fatalf("the batch's frame is at %d, the durable end at %d", lastFrame.off, durable.End)
	}
	sum := sha256.Sum256(b[lastFrame.off+headerSize : lastFrame.off+lastFrame.len])
	tail := durable
	tail.Seq, tail.Head, tail.End = durable.Seq+1, sum[:], lastFrame.off+lastFrame.len
	adir := filepath.Join(t.TempDir(), "a")
	_, err = j.Archive(adir, tail)
	want := "journal: " + dir + ": archive before the mark at seq 14: the mark does not match: seq 14 is past the durable end of the log (seq 13) (nothing archived): journal: mark does not match the log"
	if !errors.Is(err, ErrMarkMismatch) || err.Error() != want {
		t.Fatalf("a mark of the unflushed tail:\n got %v\nwant %s", err, want)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j.Mark(), tail) {
		t.Fatalf("the durable mark %+v, the one made from the bytes %+v", j.Mark(), tail)
	}
	mustArchive(t, j, adir, tail)
}

// Archive directories Archive refuses, one past each limit: one holding
// a segment, one holding another archive, a file, one inside the journal;
// an empty one it takes.
func TestArchiveRefusesDirs(t *testing.T) {
	dir, opts, marks := markedLog(t)
	root := t.TempDir()
	{ // another log's archive of seq 1 to 8
		odir, oopts, omarks := markedLog(t)
		o := mustOpen(t, odir, oopts)
		mustArchive(t, o, filepath.Join(root, "other"), omarks[10])
		mustClose(t, o)
	}
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	segs := liveSegments(t, dir)
	withSeg := filepath.Join(root, "with-seg")
	if err := os.Mkdir(withSeg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withSeg, segName(1)), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{withSeg, "journal: archive directory " + withSeg + " is not empty (it holds " + segName(1) + ") and has no archive manifest: journal: archive directory in use"},
		{filepath.Join(root, "other"), "journal: archive directory " + filepath.Join(root, "other") + " holds the archive of seq 1 to 8, not this one of seq 1 to 21: journal: archive directory in use"},
		{file, "journal: archive directory " + file + " is not a directory: journal: archive directory in use"},
		{filepath.Join(dir, "archive"), "journal: archive directory " + filepath.Join(dir, "archive") + " is inside the journal " + dir + ": journal: archive directory in use"},
	} {
		_, err := j.Archive(c.dir, marks[25])
		if !errors.Is(err, ErrArchiveDirInUse) || err.Error() != c.want {
			t.Fatalf("archive into %s:\n got %v\nwant %s", c.dir, err, c.want)
		}
		if got := liveSegments(t, dir); !reflect.DeepEqual(got, segs) {
			t.Fatalf("segments %v after a refused Archive", got)
		}
		if _, ok := j.Base(); ok {
			t.Fatal("a refused Archive set a base")
		}
	}
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if a := mustArchive(t, j, empty, marks[25]); a.Last != 21 {
		t.Fatalf("archived to %d", a.Last)
	}
}

// Journals Archive refuses: read-only, closed; and marks a based journal
// refuses: one archived already, the base itself.
func TestArchiveRefusesJournals(t *testing.T) {
	dir, opts, marks := markedLog(t)
	adir := filepath.Join(t.TempDir(), "a")
	ro := mustOpen(t, dir, Options{ReadOnly: true})
	if _, err := ro.Archive(adir, marks[25]); !errors.Is(err, ErrReadOnly) || err.Error() != "journal: "+dir+": journal: opened read-only" {
		t.Fatalf("read-only: %v", err)
	}
	mustClose(t, ro)
	j := mustOpen(t, dir, opts)
	mustArchive(t, j, adir, marks[10])
	for _, c := range []struct {
		m    Mark
		is   error
		want string
	}{
		{marks[7], ErrArchived, "journal: " + dir + ": archive before the mark at seq 7: it is archived in a already (the log here starts at seq 9)"},
		{marks[8], ErrNothingToArchive, "journal: " + dir + ": archive before the mark at seq 8: it is the base, everything before it is archived: journal: nothing to archive"},
		{marks[12], ErrNothingToArchive, "journal: " + dir + ": archive before the mark at seq 12: no whole segment precedes it (it is in " + segName(9) + ", the first the log has here): journal: nothing to archive"},
	} {
		_, err := j.Archive(filepath.Join(t.TempDir(), "b"), c.m)
		if !errors.Is(err, c.is) || err.Error() != c.want {
			t.Fatalf("mark %d:\n got %v\nwant %s", c.m.Seq, err, c.want)
		}
	}
	mustClose(t, j)
	if _, err := j.Archive(adir, marks[25]); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
