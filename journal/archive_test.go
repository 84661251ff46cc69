package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// liveSegments lists the segment files of a directory.
func liveSegments(t *testing.T, dir string) []string {
	t.Helper()
	ls, err := listDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range ls.segs {
		out = append(out, s.name)
	}
	return out
}

func mustArchive(t *testing.T, j *Journal, dir string, m Mark) Archived {
	t.Helper()
	a, err := j.Archive(dir, m)
	if err != nil {
		t.Fatalf("Archive(%s, mark %d): %v", dir, m.Seq, err)
	}
	return a
}

func mustOpenArchive(t *testing.T, dir string) *Archive {
	t.Helper()
	a, err := OpenArchive(dir)
	if err != nil {
		t.Fatalf("OpenArchive(%s): %v", dir, err)
	}
	return a
}

// archiveRecords is every record an archive holds.
func archiveRecords(t *testing.T, a *Archive) []Record {
	t.Helper()
	var out []Record
	if err := a.Iterate(0, func(r Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("archive Iterate: %v", err)
	}
	return out
}

// The marked log (600-byte segments 1, 5, 9, 14, 19 (a rebind first),
// 22, 27, 31, 36, 41) is archived before a mark in segment 22: segments 1
// to 19 go, with the rebind, into the archive, which verifies on its own
// and ends at the head the live log's base starts from; the live journal
// reads from the base, refuses what is archived by the archive's name,
// appends on and reopens, with and without From.
func TestArchive(t *testing.T) {
	dir, opts, marks := markedLog(t)
	var all []Record
	j := mustOpen(t, dir, opts)
	all = collect(t, j, 1)
	adir := filepath.Join(t.TempDir(), "archive-1")
	a := mustArchive(t, j, adir, marks[25])
	if a.First != 1 || a.Last != 21 || a.Name != "archive-1" || a.Dir != adir || len(a.Segments) != 5 {
		t.Fatalf("archived %+v, want seq 1 to 21 in 5 segments in archive-1", a)
	}
	if a.Prev != [32]byte{} || !bytes.Equal(a.Head[:], marks[21].Head) || a.Binding != [32]byte(marks[21].Binding) {
		t.Fatalf("archive's heads %x..%x binding %x, want zero..%x and the rebound binding", a.Prev, a.Head, a.Binding, marks[21].Head)
	}
	if got, want := liveSegments(t, dir), []string{segName(22), segName(27), segName(31), segName(36), segName(41)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("live segments %v, want %v", got, want)
	}
	b, ok := j.Base()
	if !ok || b.Seq != 21 || b.Head != a.Head || len(b.Archives) != 1 || b.Archives[0].Manifest != a.Manifest || len(b.Leftover) != 0 {
		t.Fatalf("base %+v, %v", b, ok)
	}
	checkArchivedReads(t, j, all, "archive-1")
	seq := mustAppend(t, j, "after", 1)
	mustClose(t, j)

	// The archive alone: every record, in order, the rebind among them.
	ar := mustOpenArchive(t, adir)
	if !reflect.DeepEqual(ar.Archived(), a) {
		t.Fatalf("OpenArchive says %+v, Archive said %+v", ar.Archived(), a)
	}
	got := archiveRecords(t, ar)
	if len(got) != 21 || got[18].Kind != kindRebind {
		t.Fatalf("archive holds %d records (record 19 %q)", len(got), got[18].Kind)
	}
	for i, r := range got {
		if r.Seq != all[i].Seq || !bytes.Equal(r.Body, all[i].Body) || r.Place.Segment != all[i].Place.Segment || r.Place.Offset != all[i].Place.Offset {
			t.Fatalf("archived record %d differs: %+v, was %+v", i+1, r, all[i])
		}
	}

	// Reopened: verified from the base, without and with From.
	j = mustOpen(t, dir, opts)
	s := j.Summary()
	if j.LastSeq() != seq || s.FirstSeq != 22 || s.Records != seq-21 || s.Base == nil || s.Base.Archives[0].Name != "archive-1" {
		t.Fatalf("reopened: last %d, summary first %d records %d base %+v", j.LastSeq(), s.FirstSeq, s.Records, s.Base)
	}
	if first := collect(t, j, 0)[0]; first.Seq != 22 || !bytes.Equal(first.Prev, a.Head[:]) {
		t.Fatalf("the first live record is %d with prev %x, want 22 chaining on %x", first.Seq, first.Prev, a.Head)
	}
	mustClose(t, j)
	var handed []uint64
	fo := opts
	fo.From = ptr(marks[30])
	fo.OnRecord = func(r Record) error { handed = append(handed, r.Seq); return nil }
	j = mustOpen(t, dir, fo)
	mustClose(t, j)
	if len(handed) != int(seq-30) || handed[0] != 31 {
		t.Fatalf("from mark 30, OnRecord got %v", handed)
	}
	if _, err := Open(dir, testOptions()); !errors.Is(err, ErrBindingMismatch) {
		t.Fatalf("open with the config before the archived rebind: %v, want ErrBindingMismatch", err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil || ro.LastSeq() != seq || ro.Summary().FirstSeq != 22 {
		t.Fatalf("read-only open: %v", err)
	}
	mustClose(t, ro)
}

func ptr[T any](v T) *T { return &v }

// checkArchivedReads checks that every record before the base is refused
// by ReadAt and Iterate naming the archive, and every one after it read.
func checkArchivedReads(t *testing.T, j *Journal, all []Record, name string) {
	t.Helper()
	b, _ := j.Base()
	for _, r := range all {
		_, err := j.ReadAt(r.Place)
		ierr := j.Iterate(r.Seq, func(Record) error { return errors.New("stop") })
		if r.Seq <= b.Seq {
			for _, e := range []error{err, ierr} {
				if !errors.Is(e, ErrArchived) || !strings.Contains(e.Error(), " archived in "+name+" ") {
					t.Fatalf("seq %d read: %v, want ErrArchived naming %s", r.Seq, e, name)
				}
			}
			continue
		}
		if err != nil {
			t.Fatalf("seq %d, after the base: ReadAt: %v", r.Seq, err)
		}
	}
	_, err := j.ReadAt(all[0].Place)
	var ae *ArchivedError
	if !errors.As(err, &ae) || ae.Seq != 1 || ae.Archive != name {
		t.Fatalf("ReadAt(seq 1): %#v, want an *ArchivedError of seq 1 in %s", err, name)
	}
	want := "journal: " + j.Dir() + ": seq 1 is archived in " + name
	if _, err := j.ReadAt(all[0].Place); !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("ReadAt(seq 1): %q, want it to start %q", err, want)
	}
}

// A second archive goes on from the first: its Prev is the first's Head,
// the base names both, and a record is refused naming the archive that
// holds it.
func TestArchiveTwice(t *testing.T) {
	dir, opts, marks := markedLog(t)
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	all := collect(t, j, 1)
	root := t.TempDir()
	a1 := mustArchive(t, j, filepath.Join(root, "a1"), marks[10])
	a2 := mustArchive(t, j, filepath.Join(root, "a2"), marks[33])
	if a1.First != 1 || a1.Last != 8 || a2.First != 9 || a2.Last != 30 || a2.Prev != a1.Head {
		t.Fatalf("archives %d-%d, %d-%d (prev %x, first's head %x)", a1.First, a1.Last, a2.First, a2.Last, a2.Prev, a1.Head)
	}
	b, _ := j.Base()
	if len(b.Archives) != 2 || b.Archives[0].Name != "a1" || b.Archives[1].Name != "a2" || b.Seq != 30 || b.Head != a2.Head {
		t.Fatalf("base %+v", b)
	}
	for seq, name := range map[uint64]string{1: "a1", 8: "a1", 9: "a2", 30: "a2"} {
		if _, err := j.ReadAt(all[seq-1].Place); !errors.Is(err, ErrArchived) || !strings.Contains(err.Error(), "archived in "+name+" ") {
			t.Fatalf("ReadAt(%d): %v, want archived in %s", seq, err, name)
		}
	}
	if _, err := j.ReadAt(all[30].Place); err != nil {
		t.Fatalf("ReadAt(31): %v", err)
	}
	// Archive 2 alone verifies from archive 1's end.
	if got := archiveRecords(t, mustOpenArchive(t, filepath.Join(root, "a2"))); len(got) != 22 || got[0].Seq != 9 {
		t.Fatalf("archive 2 holds %d records from %d", len(got), got[0].Seq)
	}
}

// Open on a journal with a base: a mark at the base goes on from the
// base; one before it is archived (and a mismatch, so that an owner tries
// another); a replay from record 1 is refused naming the first archive.
func TestArchiveOpenFrom(t *testing.T) {
	dir, opts, marks := markedLog(t)
	j := mustOpen(t, dir, opts)
	mustArchive(t, j, filepath.Join(t.TempDir(), "old"), marks[8])
	mustClose(t, j)
	cases := []struct {
		from    *Mark
		replay  bool
		wantErr []error
		want    string
	}{
		{from: ptr(marks[8])},
		{from: ptr(marks[9])},
		{from: ptr(marks[7]), wantErr: []error{ErrArchived, ErrMarkMismatch},
			want: "journal: " + dir + ": the mark at seq 7 does not match: it is archived in old (the log here starts at seq 9; open from a later mark)"},
		{replay: true, wantErr: []error{ErrArchived},
			want: "journal: " + dir + ": records 1 to 8 are archived in old and the archives after it: a replay from record 1 (OnRecord without From) needs them; open from a mark at seq 8 or later"},
	}
	for _, c := range cases {
		o := opts
		o.From = c.from
		n := 0
		if c.from != nil || c.replay {
			o.OnRecord = func(Record) error { n++; return nil }
		}
		j, err := Open(dir, o)
		if c.wantErr == nil {
			if err != nil {
				t.Fatalf("from %+v: %v", c.from, err)
			}
			if want := int(j.LastSeq() - c.from.Seq); n != want {
				t.Fatalf("from %d: %d records handed, want %d", c.from.Seq, n, want)
			}
			mustClose(t, j)
			continue
		}
		for _, w := range c.wantErr {
			if !errors.Is(err, w) {
				t.Fatalf("open: %v, want %v", err, w)
			}
		}
		if err.Error() != c.want {
			t.Fatalf("open:\n got %q\nwant %q", err, c.want)
		}
	}
	// A mark at the base whose head is not the base's is the mark's
	// mismatch.
	bad := marks[8]
	bad.Head = bytes.Repeat([]byte{7}, 32)
	o := opts
	o.From = &bad
	if _, err := Open(dir, o); !errors.Is(err, ErrMarkMismatch) || errors.Is(err, ErrArchived) || !strings.Contains(err.Error(), "it is at the base, but its head is not the base's") {
		t.Fatalf("a wrong mark at the base: %v", err)
	}
}

// Which segments a mark archives, at the bounds: one in the first
// segment archives nothing, the first of the next archives the first,
// the last of a segment another follows archives it too, and the tail
// archives all but the last segment.
func TestArchiveBounds(t *testing.T) {
	for _, c := range []struct {
		mark uint64
		last uint64 // 0: ErrNothingToArchive
	}{{1, 0}, {3, 0}, {4, 4}, {5, 4}, {8, 8}, {9, 8}, {40, 40}, {41, 40}} {
		dir, opts, marks := markedLog(t)
		j := mustOpen(t, dir, opts)
		adir := filepath.Join(t.TempDir(), "a")
		a, err := j.Archive(adir, marks[c.mark])
		switch {
		case c.last == 0:
			want := "journal: " + dir + ": archive before the mark at seq " + strconv.FormatUint(c.mark, 10) + ": no whole segment precedes it (it is in " + segName(1) + ", the first the log has here): journal: nothing to archive"
			if !errors.Is(err, ErrNothingToArchive) || err.Error() != want {
				t.Fatalf("mark %d:\n got %v\nwant %s", c.mark, err, want)
			}
			if _, serr := os.Stat(adir); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("mark %d: nothing archived, yet %s: %v", c.mark, adir, serr)
			}
		case err != nil:
			t.Fatalf("mark %d: %v", c.mark, err)
		case a.First != 1 || a.Last != c.last:
			t.Fatalf("mark %d archived %d to %d, want 1 to %d", c.mark, a.First, a.Last, c.last)
		}
		mustClose(t, j)
		j = mustOpen(t, dir, opts)
		if j.LastSeq() != 41 {
			t.Fatalf("mark %d: reopened at %d", c.mark, j.LastSeq())
		}
		mustClose(t, j)
	}
}
