package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// placedLog writes a log with rotations and records of every size class
// (small, one that fills ReadAt's first read exactly, one a byte over,
// one larger than a segment) and returns it open with the places AppendAt
// returned, by seq.
func placedLog(t *testing.T) (*Journal, map[uint64]Place) {
	t.Helper()
	opts := testOptions()
	opts.SegmentSize = 8 << 10
	j := mustOpen(t, journalDir(t), opts)
	places := map[uint64]Place{}
	add := func(kind string, body any) {
		t.Helper()
		p, err := j.AppendAt(kind, body)
		if err != nil {
			t.Fatalf("AppendAt: %v", err)
		}
		if p.Seq != j.LastSeq() {
			t.Fatalf("AppendAt returned seq %d, the log is at %d", p.Seq, j.LastSeq())
		}
		places[p.Seq] = p
	}
	for i := range 30 {
		add("tick", tick{N: i, Note: strings.Repeat("p", i*13)})
	}
	// Bodies whose frames are readAtChunk-1, readAtChunk and
	// readAtChunk+1 bytes: the largest read at once and one past it.
	for _, frame := range []int{readAtChunk - 1, readAtChunk, readAtChunk + 1} {
		add("blob", bodyForFrame(t, j, "blob", frame))
	}
	add("blob", bytes.Repeat([]byte{7}, 40<<10))
	for i := range 5 {
		p, err := j.AppendLinkedAt("link", tick{N: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		places[p.Seq] = p
	}
	return j, places
}

// bodyForFrame returns a byte-string body that makes the next record's
// frame exactly frame bytes.
func bodyForFrame(t *testing.T, j *Journal, kind string, frame int) []byte {
	t.Helper()
	seq := j.LastSeq() + 1
	for n := frame; n > 0; n-- {
		b, err := encMode.Marshal(make([]byte, n))
		if err != nil {
			t.Fatal(err)
		}
		// at is unix ms: a time of this century takes the head of
		// 1700000000000 (an 8-byte uint).
		if headerSize+payloadSize(seq, kind, 1700000000000, len(b)) == frame {
			return make([]byte, n)
		}
	}
	t.Fatalf("no body makes a %d-byte frame", frame)
	return nil
}

// TestPlacesReadBack: every record's place from Iterate is the one AppendAt
// returned, and ReadAt there gives Iterate's record, on the journal that
// wrote it, read-only, and opened from a mark (places before the mark
// included).
func TestPlacesReadBack(t *testing.T) {
	j, places := placedLog(t)
	dir := j.Dir()
	all := collect(t, j, 1)
	for _, r := range all {
		if p, ok := places[r.Seq]; ok && p != r.Place {
			t.Fatalf("record %d: Iterate's place %+v, AppendAt's %+v", r.Seq, r.Place, p)
		}
		if r.Place.Seq != r.Seq {
			t.Fatalf("record %d has place %+v", r.Seq, r.Place)
		}
	}
	checkReadAt(t, j, all)
	sizes := map[int64]bool{}
	for _, s := range j.Summary().Segments {
		for _, f := range frames(t, filepath.Join(dir, s.Name)) {
			sizes[f.len] = true
		}
	}
	for _, n := range []int64{readAtChunk - 1, readAtChunk, readAtChunk + 1} {
		if !sizes[n] {
			t.Fatalf("no frame of %d bytes was read", n)
		}
	}
	mid := all[len(all)/2]
	mustClose(t, j)
	if _, err := j.ReadAt(mid.Place); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}

	ro := testOptions()
	ro.ReadOnly = true
	r := mustOpen(t, dir, ro)
	checkReadAt(t, r, all)
	m := r.Mark()
	mustClose(t, r)

	// From the last mark: places in the skipped segments read back too.
	opts := testOptions()
	opts.SegmentSize = 8 << 10
	opts.From = &m
	f := mustOpen(t, dir, opts)
	defer mustClose(t, f)
	checkReadAt(t, f, all)
}

func checkReadAt(t *testing.T, j *Journal, all []Record) {
	t.Helper()
	for _, want := range all {
		got, err := j.ReadAt(want.Place)
		if err != nil {
			t.Fatalf("ReadAt(%+v): %v", want.Place, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ReadAt(%+v) = %+v, want %+v", want.Place, got, want)
		}
	}
}

// TestReadAtWrongPlaces: a place that is none of a durable record is
// ErrBadPlace, one whose bytes are not its record a *CorruptError; each
// bound is tried at it and one past it.
func TestReadAtWrongPlaces(t *testing.T) {
	j, _ := placedLog(t)
	defer mustClose(t, j)
	all := collect(t, j, 1)
	last := all[len(all)-1].Place
	segs := j.Summary().Segments
	lastSeg := segs[len(segs)-1]
	inFirst, inSecond := all[1].Place, all[len(all)-1].Place
	for _, c := range []struct {
		name string
		p    Place
		bad  bool // ErrBadPlace; else corrupt at p.Offset
	}{
		{"seq 0", Place{0, 1, 0}, true},
		{"one past the last durable seq", Place{last.Seq + 1, last.Segment, last.Offset}, true},
		{"no such segment", Place{inFirst.Seq, 2, inFirst.Offset}, true},
		{"seq before the segment", Place{lastSeg.FirstSeq - 1, lastSeg.FirstSeq, 0}, true},
		{"seq in the next segment", Place{segs[1].FirstSeq, segs[0].FirstSeq, 0}, true},
		{"offset -1", Place{inFirst.Seq, inFirst.Segment, -1}, true},
		{"offset at the durable end", Place{inSecond.Seq, inSecond.Segment, lastSeg.Used}, true},
		{"offset one before the durable end", Place{inSecond.Seq, inSecond.Segment, lastSeg.Used - 1}, false},
		{"mid-frame", Place{inFirst.Seq, inFirst.Segment, inFirst.Offset + 3}, false},
		{"another record's seq", Place{inFirst.Seq + 1, inFirst.Segment, inFirst.Offset}, false},
	} {
		_, err := j.ReadAt(c.p)
		if strings.Contains(errString(err), "\n") {
			t.Fatalf("%s: error of more than one line: %q", c.name, err)
		}
		if c.bad {
			if !errors.Is(err, ErrBadPlace) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: ReadAt(%+v) = %v, want ErrBadPlace", c.name, c.p, err)
			}
			continue
		}
		wantCorrupt(t, err, filepath.Join(j.Dir(), segName(c.p.Segment)), c.p.Offset)
	}
	// The last byte of the durable part is readable as a place bound: the
	// last record's own place reads.
	if _, err := j.ReadAt(last); err != nil {
		t.Fatalf("ReadAt of the last record: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestReadAtFlippedByte: a byte flipped anywhere in a record's frame is a
// *CorruptError at its place.
func TestReadAtFlippedByte(t *testing.T) {
	j, _ := placedLog(t)
	defer mustClose(t, j)
	all := collect(t, j, 1)
	for _, r := range []Record{all[3], all[31], all[33]} {
		path := filepath.Join(j.Dir(), segName(r.Place.Segment))
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fr := frames(t, path)
		var span frameSpan
		for _, f := range fr {
			if f.off == r.Place.Offset {
				span = f
			}
		}
		for _, at := range []int64{0, 4, headerSize, span.len / 2, span.len - 1} {
			b := bytes.Clone(orig)
			b[span.off+at] ^= 0x40
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := j.ReadAt(r.Place)
			wantCorrupt(t, err, path, r.Place.Offset)
		}
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOnRecordMatchesIterate: without From, OnRecord gets every record
// from 1, once, in order, with its place: what Iterate gives after Open.
func TestOnRecordMatchesIterate(t *testing.T) {
	j, _ := placedLog(t)
	dir := j.Dir()
	want := collect(t, j, 1)
	mustClose(t, j)
	for _, ro := range []bool{false, true} {
		var got []Record
		opts := testOptions()
		opts.ReadOnly = ro
		opts.OnRecord = func(r Record) error { got = append(got, r); return nil }
		k := mustOpen(t, dir, opts)
		mustClose(t, k)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read-only %v: OnRecord got %d records, Iterate %d (or they differ)", ro, len(got), len(want))
		}
	}
}

// TestOnRecordErrorStopsOpen: an error from OnRecord is Open's, as is,
// nothing after it is handed over, and nothing on disk changes (not even
// the repair of a torn tail).
func TestOnRecordErrorStopsOpen(t *testing.T) {
	dir := smallLog(t)
	seg := filepath.Join(dir, segName(1))
	fr := frames(t, seg)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	last := fr[len(fr)-1]
	clear(b[last.off+last.len-5 : last.off+last.len])
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	stop := errors.New("owner: cannot replay record 2")
	calls := 0
	opts := testOptions()
	opts.OnRecord = func(r Record) error {
		calls++
		if r.Seq == 2 {
			return stop
		}
		return nil
	}
	if _, err := Open(dir, opts); err != stop {
		t.Fatalf("Open with a failing OnRecord: %v, want its error as is", err)
	}
	if calls != 2 {
		t.Fatalf("OnRecord called %d times, want 2 (records 1 and 2)", calls)
	}
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatal("an Open stopped by OnRecord changed the directory")
	}
	opts.OnRecord = nil
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	if len(j.Recoveries()) != 1 || j.LastSeq() != 3 {
		t.Fatalf("the open after it: seq %d, recoveries %+v", j.LastSeq(), j.Recoveries())
	}
}

// TestOnRecordForeignLog: a log of another owner is refused as such
// before OnRecord sees any of it.
func TestOnRecordForeignLog(t *testing.T) {
	dir := smallLog(t)
	opts := testOptions()
	opts.Owner = "another-owner"
	opts.OnRecord = func(r Record) error {
		t.Fatalf("OnRecord was handed record %d of another owner's log", r.Seq)
		return nil
	}
	if _, err := Open(dir, opts); !errors.Is(err, ErrBindingMismatch) {
		t.Fatalf("Open of another owner's log: %v", err)
	}
}
