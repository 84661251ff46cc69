package journal

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// segmentFileSizes returns the size of every segment file in dir, in order.
func segmentFileSizes(t *testing.T, dir string) []int64 {
	t.Helper()
	var sizes []int64
	for _, s := range mustInspect(t, dir).Segments {
		fi, err := os.Stat(filepath.Join(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	return sizes
}

func mustInspect(t *testing.T, dir string) Summary {
	t.Helper()
	s, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fill appends records of about 1 KiB until the journal has n segments.
func fill(t *testing.T, j *Journal, n int) {
	t.Helper()
	for len(j.Summary().Segments) < n {
		mustAppend(t, j, "tick", tick{N: 1, Note: strings.Repeat("x", 1000)})
	}
}

// A journal made with a small segment size keeps it when it is opened with
// the default: its segments, the last one preallocated again at open and
// the next one it rotates to, are the size its bind record records.
func TestSegmentSizeSmallOpensUnderDefault(t *testing.T) {
	dir := journalDir(t)
	small := testOptions()
	small.SegmentSize = 8192
	j := mustOpen(t, dir, small)
	fill(t, j, 2)
	mustClose(t, j)

	def := testOptions()
	def.SegmentSize = 0
	j = mustOpen(t, dir, def)
	if got := j.SegmentSize(); got != 8192 {
		t.Fatalf("SegmentSize under the default = %d, want the recorded 8192", got)
	}
	fill(t, j, 3)
	mustClose(t, j)
	for i, size := range segmentFileSizes(t, dir) {
		if size != 8192 {
			t.Errorf("segment %d is %d bytes, want 8192", i+1, size)
		}
	}
}

// A journal made with the default segment size keeps it when it is opened
// with a small one.
func TestSegmentSizeDefaultOpensUnderSmall(t *testing.T) {
	dir := journalDir(t)
	def := testOptions()
	def.SegmentSize = 0
	j := mustOpen(t, dir, def)
	mustAppend(t, j, "tick", tick{N: 1})
	mustClose(t, j)

	small := testOptions()
	small.SegmentSize = 8192
	j = mustOpen(t, dir, small)
	if got := j.SegmentSize(); got != DefaultSegmentSize {
		t.Fatalf("SegmentSize under 8192 = %d, want the recorded %d", got, DefaultSegmentSize)
	}
	// Fill past 8192 bytes: no rotation, the segment is 64 MiB.
	for i := 0; i < 16; i++ {
		mustAppend(t, j, "tick", tick{N: i, Note: strings.Repeat("x", 1000)})
	}
	mustClose(t, j)
	if sizes := segmentFileSizes(t, dir); len(sizes) != 1 || sizes[0] != DefaultSegmentSize {
		t.Fatalf("segments %v, want one of %d bytes", sizes, DefaultSegmentSize)
	}
	j = mustOpen(t, dir, Options{ReadOnly: true, SegmentSize: 4096})
	defer mustClose(t, j)
	if got := j.SegmentSize(); got != DefaultSegmentSize {
		t.Fatalf("SegmentSize read-only = %d, want %d", got, DefaultSegmentSize)
	}
}

// The bind record records the size: a rewritten option changes nothing of
// an existing log, and the record says what Open read back.
func TestSegmentSizeInBindRecord(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 12345
	mustClose(t, mustOpen(t, dir, opts))
	j := mustOpen(t, dir, Options{ReadOnly: true})
	defer mustClose(t, j)
	var b bindBody
	if err := j.Iterate(1, func(r Record) error { return decMode.Unmarshal(r.Body, &b) }); err != nil {
		t.Fatal(err)
	}
	if b.SegmentSize == nil || *b.SegmentSize != 12345 {
		t.Fatalf("bind record segment size %v, want 12345", b.SegmentSize)
	}
	if s := j.Summary(); s.SegmentSize != 12345 {
		t.Fatalf("Summary().SegmentSize = %d, want 12345", s.SegmentSize)
	}
}

// Options.SegmentSize is 0 (the default) or 1 to MaxSegmentSize.
func TestSegmentSizeOptionBounds(t *testing.T) {
	dir := writeLog(t, []craft{{kind: "bind", body: goodBind()}})
	for _, n := range []int64{1, MaxSegmentSize} {
		j, err := Open(dir, Options{ReadOnly: true, SegmentSize: n})
		if err != nil {
			t.Fatalf("SegmentSize %d: %v", n, err)
		}
		mustClose(t, j)
	}
	for _, n := range []int64{-1, MaxSegmentSize + 1} {
		_, err := Open(dir, Options{ReadOnly: true, SegmentSize: n})
		want := fmt.Sprintf("journal: SegmentSize %d is not 1 to 1073741824 (0 for the default)", n)
		if err == nil || err.Error() != want {
			t.Fatalf("SegmentSize %d: err = %v, want %q", n, err, want)
		}
	}
}

// A bind record's segment size is 1 to MaxSegmentSize: anything else is a
// corrupt log, refused at record 1.
func TestSegmentSizeBindRecordBounds(t *testing.T) {
	c := []byte(`{"a":1}`)
	sum := sha256.Sum256(c)
	bind := func(n uint64) bindBody {
		return bindBody{Owner: "o", Format: "f", Binding: sum[:], Config: c, SegmentSize: &n}
	}
	for _, n := range []uint64{1, MaxSegmentSize} {
		j, err := Open(writeLog(t, []craft{{kind: "bind", body: bind(n)}}), Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("bind record with segment size %d: %v", n, err)
		}
		if j.SegmentSize() != int64(n) {
			t.Errorf("SegmentSize = %d, want %d", j.SegmentSize(), n)
		}
		mustClose(t, j)
	}
	for _, n := range []uint64{0, MaxSegmentSize + 1} {
		dir := writeLog(t, []craft{{kind: "bind", body: bind(n)}})
		seg := filepath.Join(dir, segName(1))
		_, err := Open(dir, Options{ReadOnly: true})
		ce := wantCorrupt(t, err, seg, 0)
		want := fmt.Sprintf("record 1: bind record: segment size %d is not 1 to 1073741824", n)
		if ce.Reason != want {
			t.Fatalf("reason %q, want %q", ce.Reason, want)
		}
	}
}

// A log whose bind record records no size (made before it was recorded)
// takes Options.SegmentSize, as every open did then.
func TestSegmentSizeUnrecordedTakesOption(t *testing.T) {
	dir := writeLog(t, []craft{{kind: "bind", body: goodBind()}})
	for _, n := range []int64{8192, 16384} {
		j := mustOpen(t, dir, Options{SegmentSize: n})
		if j.SegmentSize() != n {
			t.Errorf("SegmentSize = %d, want %d", j.SegmentSize(), n)
		}
		mustClose(t, j)
		if sizes := segmentFileSizes(t, dir); sizes[0] != n {
			t.Errorf("the last segment is %d bytes after an open with %d", sizes[0], n)
		}
	}
}
