package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func TestRotationAndIteration(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 600
	j := mustOpen(t, dir, opts)
	const n = 60
	for i := 2; i <= n; i++ {
		mustAppend(t, j, "tick", tick{N: i, Note: strings.Repeat("r", 20)})
	}
	mustClose(t, j)
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)

	segs := j.Summary().Segments
	if len(segs) < 5 {
		t.Fatalf("%d segments, want rotation at 600 bytes", len(segs))
	}
	next := uint64(1)
	for _, s := range segs {
		fi, err := os.Stat(filepath.Join(dir, s.Name))
		if err != nil || fi.Size() != 600 || s.Size != 600 {
			t.Fatalf("segment %s: size %d, %v; want the 600-byte preallocation", s.Name, fi.Size(), err)
		}
		if s.Name != segName(s.FirstSeq) || s.FirstSeq != next || s.Used > 600 {
			t.Fatalf("segment %+v, want it to start at seq %d", s, next)
		}
		next = s.LastSeq + 1
	}
	if next != n+1 {
		t.Fatalf("segments end at seq %d, want %d", next-1, n)
	}
	// Rotation happens only when the next record does not fit.
	for i, s := range segs[:len(segs)-1] {
		fr := frames(t, filepath.Join(dir, segs[i+1].Name))
		if s.Used+fr[0].len <= 600 {
			t.Fatalf("segment %s rotated with %d bytes free, enough for the next %d-byte frame", s.Name, 600-s.Used, fr[0].len)
		}
	}

	// Iterate from every seq, including the first of a segment, the middle
	// of one, the last record and past it.
	for from := uint64(0); from <= n+2; from++ {
		recs := collect(t, j, from)
		start := max(from, 1)
		want := 0
		if start <= n {
			want = int(n - start + 1)
		}
		if len(recs) != want {
			t.Fatalf("Iterate(%d): %d records, want %d", from, len(recs), want)
		}
		for i, r := range recs {
			if r.Seq != start+uint64(i) {
				t.Fatalf("Iterate(%d): record %d has seq %d", from, i, r.Seq)
			}
		}
	}

	// An error from fn stops iteration and comes back as is.
	stop := errors.New("stop here")
	count := 0
	err := j.Iterate(10, func(r Record) error {
		count++
		if r.Seq == 20 {
			return stop
		}
		return nil
	})
	if err != stop || count != 11 {
		t.Fatalf("Iterate with a stopping fn: %v after %d records", err, count)
	}
}

// TestIterateSeesDamage: Iterate re-reads from disk and reports damage made
// after Open.
func TestIterateSeesDamage(t *testing.T) {
	dir := smallLog(t)
	j := mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	seg := filepath.Join(dir, segName(1))
	fr := frames(t, seg)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xee}, fr[2].off+headerSize+5)
	f.Close()
	err = j.Iterate(1, func(Record) error { return nil })
	wantCorrupt(t, err, seg, fr[2].off)
}

// TestEmptyLastSegmentGrows: an empty last segment (left by a crash right
// after it was created) too small for the next record is grown, not
// replaced by a second segment of the same name.
func TestEmptyLastSegmentGrows(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 256
	j := mustOpen(t, dir, opts)
	mustAppend(t, j, "tick", 1)
	next := j.LastSeq() + 1
	mustClose(t, j)
	// What a crash at segment-created leaves for a record that fitted 256 bytes.
	if err := os.WriteFile(filepath.Join(dir, segName(next)), make([]byte, 256), 0o600); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, dir, opts)
	if got := mustAppend(t, j, "tick", strings.Repeat("w", 600)); got != next {
		t.Fatalf("append = %d, want %d", got, next)
	}
	mustAppend(t, j, "tick", 2)
	mustClose(t, j)
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)
	segs := j.Summary().Segments
	grown := segs[len(segs)-2]
	if j.LastSeq() != next+1 || grown.FirstSeq != next || grown.Records != 1 || grown.Size < 600 {
		t.Fatalf("LastSeq %d segments %+v, want segment %d grown to hold the big record", j.LastSeq(), segs, next)
	}
}

// TestUnfinishedSegmentRemoved: the temporary file of a segment whose
// creation a crash interrupted is removed by a read-write open and left
// alone by a read-only one.
func TestUnfinishedSegmentRemoved(t *testing.T) {
	dir := journalDir(t)
	mustClose(t, mustOpen(t, dir, testOptions()))
	tmp := filepath.Join(dir, segName(2)+tmpSuffix)
	if err := os.WriteFile(tmp, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	mustClose(t, mustOpen(t, dir, Options{ReadOnly: true}))
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("read-only open touched %s: %v", tmp, err)
	}
	j := mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there after a read-write open: %v", tmp, err)
	}
	if seq := mustAppend(t, j, "tick", 1); seq != 2 {
		t.Fatalf("append = %d", seq)
	}
}

// TestZeroAheadKeepsRecords crosses the 1 MiB zero-ahead steps and segment
// ends many times with large records and checks every byte that comes back.
func TestZeroAheadKeepsRecords(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 3 << 20
	j := mustOpen(t, dir, opts)
	if want := j.tailOff + zeroAhead; j.zeroedTo != want {
		t.Fatalf("after the bind record the segment is written up to %d, want %d (zeros ahead)", j.zeroedTo, want)
	}
	bodies := map[uint64][]byte{}
	for i := range 150 {
		body := make([]byte, 30000+i*7)
		for k := range body {
			body[k] = byte(i + k*13)
		}
		bodies[mustAppend(t, j, "blob", body)] = body
		if j.zeroedTo < j.tailOff || j.zeroedTo > j.segSize {
			t.Fatalf("written up to %d, records end at %d, segment is %d bytes", j.zeroedTo, j.tailOff, j.segSize)
		}
	}
	mustClose(t, j)
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)
	if n := len(j.Summary().Segments); n < 2 {
		t.Fatalf("%d segments, want rotation", n)
	}
	for _, r := range collect(t, j, 2) {
		var got []byte
		if err := cbor.Unmarshal(r.Body, &got); err != nil || !bytes.Equal(got, bodies[r.Seq]) {
			t.Fatalf("record %d does not read back as written (%v)", r.Seq, err)
		}
		delete(bodies, r.Seq)
	}
	if len(bodies) != 0 {
		t.Fatalf("%d records missing", len(bodies))
	}
}
