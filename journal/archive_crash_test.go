package journal

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// archiveFailpoints are Archive's failpoints in its order, each with what
// a kill there leaves: whether the base names the archive yet, and how
// many archived segments are still in the live directory.
var archiveFailpoints = []struct {
	name     string
	based    bool
	leftover int
}{
	{FailArchiveCopied, false, 0},
	{FailArchiveRenamed, false, 0},
	{FailArchiveBaseTmp, false, 0},
	{FailArchiveBased, true, 9},
	{FailArchiveRemoving, true, 8},
}

// A child archives the marked log up to its tail (seq 1 to 40, nine
// segments) and is SIGKILLed at each of Archive's failpoints. After each
// kill the journal opens, every record is in exactly one of the live log
// and the archive its base names (the archive is the journal's only once
// the base names it), and Archive run again with the same mark completes
// what the child began: one archive, one live segment, one chain.
func TestArchiveCrash(t *testing.T) {
	for _, fp := range archiveFailpoints {
		t.Run(fp.name, func(t *testing.T) {
			dir, opts, _ := markedLog(t)
			j := mustOpen(t, dir, opts)
			all := collect(t, j, 1)
			m := j.Mark()
			mustClose(t, j)
			adir := filepath.Join(t.TempDir(), "archive")
			cmd := exec.Command(os.Args[0], "-test.run=^TestArchiveChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ARCHIVE_CHILD_DIR="+dir, "ARCHIVE_CHILD_TO="+adir, failpointEnv+"="+fp.name)
			out, err := cmd.CombinedOutput()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed at %s: %v\n%s", fp.name, err, out)
			}

			j = mustOpen(t, dir, opts)
			defer mustClose(t, j)
			b, based := j.Base()
			if based != fp.based || len(b.Leftover) != fp.leftover {
				t.Fatalf("after a kill at %s: based %v, leftovers %v; want %v, %d", fp.name, based, b.Leftover, fp.based, fp.leftover)
			}
			if _, err := os.Lstat(filepath.Join(dir, baseFileName+tmpSuffix)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the open left base.tmp: %v", err)
			}
			_, perr := os.Lstat(adir + partialSuffix)
			_, aerr := OpenArchive(adir)
			if (fp.name == FailArchiveCopied) != (perr == nil) || (fp.name == FailArchiveCopied) != (aerr != nil) {
				t.Fatalf("after a kill at %s: %s: %v, the archive: %v", fp.name, adir+partialSuffix, perr, aerr)
			}
			everyRecordOnce(t, j, all)

			a := mustArchive(t, j, adir, m)
			if a.First != 1 || a.Last != 40 {
				t.Fatalf("the rerun archived %d to %d", a.First, a.Last)
			}
			if got := liveSegments(t, dir); !reflect.DeepEqual(got, []string{segName(41)}) {
				t.Fatalf("after the rerun the live segments are %v", got)
			}
			if _, err := os.Lstat(adir + partialSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the rerun left %s: %v", adir+partialSuffix, err)
			}
			everyRecordOnce(t, j, all)
			if b, _ := j.Base(); len(b.Leftover) != 0 || len(b.Archives) != 1 {
				t.Fatalf("after the rerun: base %+v", b)
			}
		})
	}
}

// everyRecordOnce checks that the records of all are, with their bytes,
// in exactly one of the archive the base names and the live log, and that
// the two are one chain.
func everyRecordOnce(t *testing.T, j *Journal, all []Record) {
	t.Helper()
	var got []Record
	b, based := j.Base()
	if based {
		a := mustOpenArchive(t, b.Archives[0].Dir)
		if a.Archived().Head != b.Head || a.Archived().Manifest != b.Archives[0].Manifest {
			t.Fatalf("the archive ends at %x, the base starts at %x", a.Archived().Head, b.Head)
		}
		got = archiveRecords(t, a)
	}
	live := collect(t, j, 0)
	if based && !bytes.Equal(live[0].Prev, b.Head[:]) {
		t.Fatalf("the first live record %d does not chain on the base", live[0].Seq)
	}
	got = append(got, live...)
	if len(got) != len(all) {
		t.Fatalf("%d records in the archive and the live log, %d written", len(got), len(all))
	}
	for i := range all {
		if got[i].Seq != all[i].Seq || !bytes.Equal(got[i].Prev, all[i].Prev) || !bytes.Equal(got[i].Body, all[i].Body) {
			t.Fatalf("record %d is not the one written", all[i].Seq)
		}
	}
}

// TestArchiveChild is the crash test's child (only with
// ARCHIVE_CHILD_DIR): it archives its journal up to its tail and is
// killed at the armed failpoint.
func TestArchiveChild(t *testing.T) {
	dir := os.Getenv("ARCHIVE_CHILD_DIR")
	if dir == "" {
		t.Skip("the archive crash test's child")
	}
	opts := testOptions()
	opts.SegmentSize, opts.Config = 600, reboundConfig
	j := mustOpen(t, dir, opts)
	if _, err := j.Archive(os.Getenv("ARCHIVE_CHILD_TO"), j.Mark()); err != nil {
		t.Fatal(err)
	}
	t.Fatal("not killed")
}

// Appends, ReadAt and Iterate go on while Archive runs: every append
// lands after the tail the mark was taken at, every read either reads
// its record or is refused as archived, and the journal reopens with
// every record acknowledged.
func TestArchiveWhileAppending(t *testing.T) {
	dir, opts, marks := markedLog(t)
	j := mustOpen(t, dir, opts)
	all := collect(t, j, 1)
	stop := make(chan struct{})
	errs := make(chan error, 3)
	acked := make(chan uint64, 1<<16)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			seq, err := j.Append("tick", tick{N: i})
			if err != nil {
				errs <- err
				return
			}
			acked <- seq
		}
	}()
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			r := all[i%len(all)]
			if _, err := j.ReadAt(r.Place); err != nil && !errors.Is(err, ErrArchived) {
				errs <- err
				return
			}
			if err := j.Iterate(r.Seq, func(Record) error { return nil }); err != nil && !errors.Is(err, ErrArchived) {
				errs <- err
				return
			}
		}
	}()
	a, err := j.Archive(filepath.Join(t.TempDir(), "a"), marks[30])
	close(stop)
	for range 2 {
		if e := <-errs; e != nil {
			t.Fatal(e)
		}
	}
	if err != nil || a.Last != 30 {
		t.Fatalf("archived %+v: %v", a, err)
	}
	close(acked)
	last := uint64(0)
	for seq := range acked {
		last = max(last, seq)
	}
	mustClose(t, j)
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)
	if j.LastSeq() != last || last <= 41 {
		t.Fatalf("reopened at %d, the last acknowledged %d", j.LastSeq(), last)
	}
}

// A reader of the live journal that listed the segments just before the
// owner archived them finds one gone when it opens it: it reads again
// (as it does when the watermark is not borne out) and opens, from the
// new base.
func TestArchiveUnderReader(t *testing.T) {
	dir, opts, marks := markedLog(t)
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	archived := false
	t.Cleanup(func() { readOnlyHook = nil })
	readOnlyHook = func(point string, _ bool) {
		if point == "listed" && !archived {
			archived = true
			mustArchive(t, j, filepath.Join(t.TempDir(), "a"), marks[25])
		}
	}
	r, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a read-only open while the owner archived: %v", err)
	}
	defer mustClose(t, r)
	if !archived || r.LastSeq() != 41 || r.Summary().FirstSeq != 22 {
		t.Fatalf("archived %v; the reader read to %d from %d", archived, r.LastSeq(), r.Summary().FirstSeq)
	}
}
