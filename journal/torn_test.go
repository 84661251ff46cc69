package journal

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallLog creates a journal of the bind record and three ticks (seq 1-4)
// in one segment and returns its directory.
func smallLog(t *testing.T) string {
	t.Helper()
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	for i := range 3 {
		mustAppend(t, j, "tick", tick{N: i, Note: "torn test"})
	}
	mustClose(t, j)
	return dir
}

func payloadHash(seg []byte, f frameSpan) [32]byte {
	return sha256.Sum256(seg[f.off+headerSize : f.off+f.len])
}

// TestTornTailEveryOffset cuts the last record at every byte offset, both
// as a preallocated segment holds a torn write (zeros after the cut) and as
// a file cut short, and reopens.
func TestTornTailEveryOffset(t *testing.T) {
	base := smallLog(t)
	orig, err := os.ReadFile(filepath.Join(base, segName(1)))
	if err != nil {
		t.Fatal(err)
	}
	fr := frames(t, filepath.Join(base, segName(1)))
	if len(fr) != 4 {
		t.Fatalf("%d frames, want 4", len(fr))
	}
	last := fr[3]
	frame := orig[last.off : last.off+last.len]
	prevHash := payloadHash(orig, fr[2])
	for _, variant := range []string{"zeroed", "cut-short"} {
		for k := int64(1); k < last.len; k++ {
			dir := copyDir(t, base)
			seg := filepath.Join(dir, segName(1))
			if variant == "zeroed" {
				b := bytes.Clone(orig)
				clear(b[last.off+k : last.off+last.len])
				if err := os.WriteFile(seg, b, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Truncate(seg, last.off+k); err != nil {
				t.Fatal(err)
			}
			torn := bytes.TrimRight(frame[:k], "\x00")
			checkTorn(t, dir, variant, k, last.off, torn, prevHash)
		}
	}
}

func checkTorn(t *testing.T, dir, variant string, k, off int64, torn []byte, prevHash [32]byte) {
	t.Helper()
	var logBuf bytes.Buffer
	opts := testOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("%s at %d: Open: %v", variant, k, err)
	}
	recs := j.Recoveries()
	var evidence string
	if len(torn) == 0 {
		if len(recs) != 0 {
			t.Fatalf("%s at %d: only zeros were cut, yet recoveries %+v", variant, k, recs)
		}
	} else {
		if len(recs) != 1 || recs[0].State != RecoveryMoved || recs[0].Offset != off || recs[0].Bytes != int64(len(torn)) || recs[0].Segment != segName(1) {
			t.Fatalf("%s at %d: recoveries %+v, want one moved at %d of %d bytes", variant, k, recs, off, len(torn))
		}
		evidence = recs[0].Evidence
		got, err := os.ReadFile(filepath.Join(dir, evidence))
		if err != nil || !bytes.Equal(got, torn) {
			t.Fatalf("%s at %d: evidence %q holds %x (%v), want %x", variant, k, evidence, got, err, torn)
		}
		if !strings.Contains(logBuf.String(), "torn tail moved aside") || !strings.Contains(logBuf.String(), evidence) {
			t.Fatalf("%s at %d: recovery not logged: %q", variant, k, logBuf.String())
		}
	}
	if j.LastSeq() != 3 || j.Head() != prevHash {
		t.Fatalf("%s at %d: log ends at %d head %x, want 3 %x", variant, k, j.LastSeq(), j.Head(), prevHash)
	}
	seq := mustAppend(t, j, "tick", tick{N: 99})
	if seq != 4 {
		t.Fatalf("%s at %d: next append = %d, want 4", variant, k, seq)
	}
	if r := collect(t, j, 4); len(r) != 1 || !bytes.Equal(r[0].Prev, prevHash[:]) {
		t.Fatalf("%s at %d: new record 4 = %+v, want prev %x", variant, k, r, prevHash)
	}
	mustClose(t, j)
	if fi, err := os.Stat(filepath.Join(dir, segName(1))); err != nil || fi.Size() != 4096 {
		t.Fatalf("%s at %d: segment size after repair %v, %v; want the 4096 preallocation", variant, k, fi.Size(), err)
	}
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	recs = j.Recoveries()
	if j.LastSeq() != 4 {
		t.Fatalf("%s at %d: reopened at %d, want 4", variant, k, j.LastSeq())
	}
	if evidence != "" && (len(recs) != 1 || recs[0].State != RecoveryEarlier || recs[0].Evidence != evidence || recs[0].Bytes != int64(len(torn))) {
		t.Fatalf("%s at %d: reopened recoveries %+v, want the earlier one from %s", variant, k, recs, evidence)
	}
}

// tear zeroes the second half of the last frame of a small log's segment.
func tear(t *testing.T, dir string) (seg string, last frameSpan) {
	t.Helper()
	seg = filepath.Join(dir, segName(1))
	fr := frames(t, seg)
	last = fr[len(fr)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[last.off+last.len/2 : last.off+last.len])
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return seg, last
}

func TestTornTailReadOnly(t *testing.T) {
	dir := smallLog(t)
	_, last := tear(t, dir)
	before := snapshot(t, dir)
	s, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Recoveries) != 1 || s.Recoveries[0].State != RecoveryUnrepaired || s.Recoveries[0].Offset != last.off || s.Recoveries[0].Evidence != "" {
		t.Fatalf("read-only recoveries %+v, want one unrepaired at %d", s.Recoveries, last.off)
	}
	if s.LastSeq != 3 || !s.ReadOnly {
		t.Fatalf("read-only summary %+v", s)
	}
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatal("a read-only open changed the directory")
	}
	j := mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if r := j.Recoveries(); len(r) != 1 || r[0].State != RecoveryMoved {
		t.Fatalf("read-write open after inspection: %+v", r)
	}
}

// TestTornTailWithGarbage: a bad record followed by non-zero bytes that are
// no valid record (a batch torn in several places) is one torn tail, moved
// aside up to the last non-zero byte.
func TestTornTailWithGarbage(t *testing.T) {
	dir := smallLog(t)
	seg, last := tear(t, dir)
	b, _ := os.ReadFile(seg)
	junkAt := last.off + last.len + 100
	copy(b[junkAt:], "junk that is not a frame \x01\x02\x03")
	b[junkAt+300] = 7
	os.WriteFile(seg, b, 0o600)
	want := bytes.Clone(b[last.off : junkAt+301])
	j := mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	r := j.Recoveries()
	if len(r) != 1 || r[0].Offset != last.off || r[0].Bytes != int64(len(want)) {
		t.Fatalf("recoveries %+v, want one from %d of %d bytes", r, last.off, len(want))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, r[0].Evidence)); !bytes.Equal(got, want) {
		t.Fatal("evidence does not hold the torn record and the garbage after it")
	}
	after, _ := os.ReadFile(seg)
	if !allZero(after[last.off:]) {
		t.Fatal("segment not zeroed after the last good record")
	}
}

// TestTornEvidenceReused: a crash after the evidence file was written but
// before the segment was zeroed repeats the recovery onto the same file; a
// different tear at the same place gets a new one.
func TestTornEvidenceReused(t *testing.T) {
	dir := smallLog(t)
	seg, last := tear(t, dir)
	b, _ := os.ReadFile(seg)
	torn := bytes.TrimRight(b[last.off:last.off+last.len], "\x00")
	name := evidenceName(segName(1), last.off, 1)
	if err := os.WriteFile(filepath.Join(dir, name), torn, 0o600); err != nil {
		t.Fatal(err)
	}
	j := mustOpen(t, dir, testOptions())
	if r := j.Recoveries(); len(r) != 1 || r[0].Evidence != name || r[0].State != RecoveryMoved {
		t.Fatalf("recoveries %+v, want the existing %s reused", r, name)
	}
	mustAppend(t, j, "tick", tick{N: 1234567})
	mustClose(t, j)
	tear(t, dir)
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	r := j.Recoveries()
	if len(r) != 2 || r[0].Evidence != name || r[0].State != RecoveryEarlier || r[1].Evidence != name+".2" || r[1].State != RecoveryMoved {
		t.Fatalf("recoveries %+v, want %s earlier and %s.2 moved", r, name, name)
	}
}

// TestTornBindRecord: a log whose only record is torn is empty; Open binds
// it afresh.
func TestTornBindRecord(t *testing.T) {
	dir := journalDir(t)
	mustClose(t, mustOpen(t, dir, testOptions()))
	seg, _ := tear(t, dir)
	j := mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if j.LastSeq() != 1 || len(j.Recoveries()) != 1 || j.Owner() != testOwner {
		t.Fatalf("after a torn bind record: seq %d recoveries %+v owner %q", j.LastSeq(), j.Recoveries(), j.Owner())
	}
	if fr := frames(t, seg); len(fr) != 1 {
		t.Fatalf("%d frames, want the new bind record only", len(fr))
	}
}

// TestTornFirstRecordOfSegment: a tear at offset 0 of the last segment
// leaves it empty; the log ends in the segment before, and appends go on
// into the empty one.
func TestTornFirstRecordOfSegment(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 512
	j := mustOpen(t, dir, opts)
	var seq uint64
	for len(j.Summary().Segments) < 2 {
		seq = mustAppend(t, j, "tick", tick{N: int(seq), Note: strings.Repeat("x", 40)})
	}
	mustClose(t, j)
	seg := filepath.Join(dir, segName(seq))
	b, _ := os.ReadFile(seg)
	fr := frames(t, seg)
	clear(b[fr[0].len-3 : fr[0].len])
	os.WriteFile(seg, b, 0o600)
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)
	if j.LastSeq() != seq-1 || len(j.Recoveries()) != 1 || j.Recoveries()[0].Segment != segName(seq) || j.Recoveries()[0].Offset != 0 {
		t.Fatalf("LastSeq %d recoveries %+v, want %d and a tear at %s:0", j.LastSeq(), j.Recoveries(), seq-1, segName(seq))
	}
	if got := mustAppend(t, j, "tick", 1); got != seq {
		t.Fatalf("append = %d, want %d", got, seq)
	}
	if s := j.Summary().Segments; len(s) != 2 || s[1].Records != 1 || s[1].FirstSeq != seq {
		t.Fatalf("segments %+v", s)
	}
}
