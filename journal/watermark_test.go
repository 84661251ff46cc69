package journal

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func mustWatermark(t *testing.T, dir string) watermark {
	t.Helper()
	w, ok := readWatermark(dir)
	if !ok {
		t.Fatalf("no watermark in %s", dir)
	}
	return w
}

// TestWatermarkFollowsAppends: the watermark is the durable mark after
// Open, after every append (rotations included) and rebind, and does not
// move for an append whose write failed and was removed.
func TestWatermarkFollowsAppends(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 600
	j := mustOpen(t, dir, opts)
	check := func(what string) {
		t.Helper()
		if w, want := mustWatermark(t, dir), j.Mark().watermark(); w != want {
			t.Fatalf("%s: watermark %+v, want the mark's %+v", what, w, want)
		}
	}
	check("after creating the log")
	for i := range 30 {
		mustAppend(t, j, "tick", tick{N: i, Note: strings.Repeat("x", i*5)})
		check("after an append")
	}
	if _, err := j.Rebind(reboundConfig); err != nil {
		t.Fatal(err)
	}
	check("after a rebind")
	before := mustWatermark(t, dir)
	setHooks(t, nil, func(p string) error {
		if p == "write" {
			return syscall.ENOSPC
		}
		return nil
	})
	if _, err := j.Append("tick", tick{N: 99}); !errors.Is(err, ErrNotWritten) {
		t.Fatalf("append whose write fails: %v", err)
	}
	if w := mustWatermark(t, dir); w != before {
		t.Fatalf("a failed write moved the watermark from %+v to %+v", before, w)
	}
	faultHook = nil
	mustAppend(t, j, "tick", tick{N: 100})
	check("after the next append")
	mustClose(t, j)
	// A reopen writes it again, for what it found.
	if err := os.WriteFile(filepath.Join(dir, watermarkName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	opts.Config = reboundConfig
	j = mustOpen(t, dir, opts)
	check("after a reopen")
	mustClose(t, j)
}

// TestWatermarkDecoding: a watermark with any byte changed, of one byte
// more or less, or naming no possible log point, is none.
func TestWatermarkDecoding(t *testing.T) {
	w := watermark{Seq: 77, Segment: 70, End: 4000}
	b := w.encode()
	if got, ok := decodeWatermark(b[:]); !ok || got != w {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", w, got, ok)
	}
	for i := range b {
		c := b
		c[i] ^= 1
		if _, ok := decodeWatermark(c[:]); ok {
			t.Fatalf("byte %d changed: still a watermark", i)
		}
	}
	if _, ok := decodeWatermark(b[:watermarkSize-1]); ok {
		t.Fatal("one byte short: still a watermark")
	}
	if _, ok := decodeWatermark(append(b[:], 0)); ok {
		t.Fatal("one byte long: still a watermark")
	}
	for _, bad := range []watermark{{Seq: 5, Segment: 6, End: 100}, {Seq: 5, Segment: 0, End: 100}, {Seq: 5, Segment: 5, End: headerSize}} {
		b := bad.encode()
		if _, ok := decodeWatermark(b[:]); ok {
			t.Fatalf("%+v decodes", bad)
		}
	}
	b = watermark{}.encode()
	if _, ok := decodeWatermark(b[:]); !ok {
		t.Fatal("the empty log's watermark does not decode")
	}
}

// halfWrittenBatch writes after the durable end of dir's last segment
// what a reader can see of a batch being written: two frames of the next
// records, the first with a byte not yet there.
func halfWrittenBatch(t *testing.T, j *Journal) {
	t.Helper()
	m := j.Mark()
	var prev [hashSize]byte
	copy(prev[:], m.Head)
	var batch []byte
	for i := range uint64(2) {
		body, _ := encMode.Marshal(tick{N: int(i)})
		start := len(batch)
		batch = append(batch, make([]byte, headerSize)...)
		batch = appendPayload(batch, m.Seq+1+i, &prev, "tick", 1, body)
		putHeader(batch[start:], batch[start+headerSize:])
	}
	batch[20] = 0 // a page the reader got before the owner's copy reached it
	f, err := os.OpenFile(filepath.Join(j.Dir(), segName(m.Segment)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(batch, m.End); err != nil {
		t.Fatal(err)
	}
}

// TestLiveReadStopsAtWatermark: while the owner runs, a read-only Open
// reads up to the watermark and judges nothing past it; once the owner is
// gone the same bytes are judged as today (corrupt: a valid frame follows
// the bad one).
func TestLiveReadStopsAtWatermark(t *testing.T) {
	dir := smallLog(t)
	j := mustOpen(t, dir, testOptions())
	last := j.LastSeq()
	halfWrittenBatch(t, j)
	ro := Options{ReadOnly: true}
	r := mustOpen(t, dir, ro)
	if r.LastSeq() != last || len(r.Recoveries()) != 0 {
		t.Fatalf("live read: seq %d, recoveries %v; want seq %d and none", r.LastSeq(), r.Recoveries(), last)
	}
	mustClose(t, r)
	// An older watermark (the owner's start, before its own is written):
	// read up to it.
	w := mustWatermark(t, dir)
	prev := frames(t, filepath.Join(dir, segName(1)))[w.Seq-2] // record w.Seq-1
	writeWatermark(t, dir, watermark{Seq: w.Seq - 1, Segment: w.Segment, End: prev.off + prev.len})
	r = mustOpen(t, dir, ro)
	if r.LastSeq() != last-1 {
		t.Fatalf("live read up to an older watermark: seq %d, want %d", r.LastSeq(), last-1)
	}
	mustClose(t, r)
	mustClose(t, j)
	if _, err := Open(dir, ro); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read with no owner running: %v, want the corruption judged", err)
	}
}

// TestLiveReadFromMark: a read-only Open from a mark while the owner runs
// reads from the mark to the watermark, handing OnRecord just those.
func TestLiveReadFromMark(t *testing.T) {
	dir := smallLog(t)
	j := mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	want := collect(t, j, 3)
	// The mark at seq 2, as Journal.Mark said after it: its record ends
	// where record 3 starts.
	m := j.Mark()
	m.Seq, m.End = 2, want[0].Place.Offset
	m.Head = sha256Of(t, dir, m.End)
	halfWrittenBatch(t, j)
	var got []Record
	r := mustOpen(t, dir, Options{ReadOnly: true, From: &m, OnRecord: func(r Record) error { got = append(got, r); return nil }})
	defer mustClose(t, r)
	if r.LastSeq() != j.LastSeq() || len(r.Recoveries()) != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("live read from a mark: seq %d, recoveries %v, %d records handed; want seq %d, none, %d",
			r.LastSeq(), r.Recoveries(), len(got), j.LastSeq(), len(want))
	}
}

// sha256Of returns the payload hash of the record in dir's first segment
// whose frame ends at end.
func sha256Of(t *testing.T, dir string, end int64) []byte {
	t.Helper()
	path := filepath.Join(dir, segName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames(t, path) {
		if f.off+f.len == end {
			sum := sha256.Sum256(b[f.off+headerSize : end])
			return sum[:]
		}
	}
	t.Fatalf("no frame ends at %d", end)
	return nil
}

func writeWatermark(t *testing.T, dir string, w watermark) {
	t.Helper()
	b := w.encode()
	if err := os.WriteFile(filepath.Join(dir, watermarkName), b[:], 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLiveReadWithoutUsableWatermark: while the owner runs, a watermark
// that is absent, damaged, or that the log does not bear out (it names
// more than the log holds, or a segment it lacks) is not used: the read
// is lenient, ending at the bad frame in the last segment, reporting
// nothing.
func TestLiveReadWithoutUsableWatermark(t *testing.T) {
	for name, set := range map[string]func(dir string, w watermark){
		"absent": func(dir string, _ watermark) { os.Remove(filepath.Join(dir, watermarkName)) },
		"damaged": func(dir string, w watermark) {
			b := w.encode()
			b[5] ^= 1
			os.WriteFile(filepath.Join(dir, watermarkName), b[:], 0o600)
		},
		"past the log": func(dir string, w watermark) {
			writeWatermark(t, dir, watermark{Seq: w.Seq + 1, Segment: w.Segment, End: w.End + 100})
		},
		"a missing segment": func(dir string, w watermark) {
			writeWatermark(t, dir, watermark{Seq: w.Seq + 10, Segment: w.Seq + 1, End: 100})
		},
		"inside a frame": func(dir string, w watermark) {
			writeWatermark(t, dir, watermark{Seq: w.Seq, Segment: w.Segment, End: w.End - 1})
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := smallLog(t)
			j := mustOpen(t, dir, testOptions())
			defer mustClose(t, j)
			last := j.LastSeq()
			halfWrittenBatch(t, j)
			set(dir, mustWatermark(t, dir))
			r := mustOpen(t, dir, Options{ReadOnly: true})
			defer mustClose(t, r)
			if r.LastSeq() != last || len(r.Recoveries()) != 0 {
				t.Fatalf("seq %d, recoveries %v; want seq %d and none", r.LastSeq(), r.Recoveries(), last)
			}
		})
	}
}

// TestOwnerWaitsForReaderProbe: a reader's probe holds the lock shared
// for a moment; an owner starting then tries again until it can have it,
// up to lockTries; a lock held shared through all of them is ErrLocked.
func TestOwnerWaitsForReaderProbe(t *testing.T) {
	dir := smallLog(t)
	hold := func() *os.File {
		f, err := os.Open(filepath.Join(dir, lockFileName))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, releaseAt := range []int{1, lockTries - 1, 0} {
		probe := hold()
		tries := 0
		lockRetryHook = func(try int) {
			tries = try
			if try == releaseAt {
				probe.Close()
			}
		}
		j, err := Open(dir, testOptions())
		lockRetryHook = nil
		probe.Close()
		switch {
		case releaseAt == 0:
			if !errors.Is(err, ErrLocked) || tries != lockTries-1 || !strings.Contains(err.Error(), "held shared") {
				t.Fatalf("lock held shared throughout: %v after %d tries, want ErrLocked after %d", err, tries, lockTries)
			}
		case err != nil:
			t.Fatalf("probe released at try %d: %v", releaseAt, err)
		default:
			if tries != releaseAt {
				t.Fatalf("probe released at try %d, but the owner tried %d times", releaseAt, tries)
			}
			mustClose(t, j)
		}
	}
}

// TestReaderNeverHoldsLock: read-only opens, open or closed, leave the
// lock free: an owner takes it at its first try.
func TestReaderNeverHoldsLock(t *testing.T) {
	dir := smallLog(t)
	lockRetryHook = func(try int) { t.Errorf("the owner had to try again (%d) after read-only opens", try) }
	defer func() { lockRetryHook = nil }()
	r := mustOpen(t, dir, Options{ReadOnly: true})
	j := mustOpen(t, dir, testOptions())
	r2 := mustOpen(t, dir, Options{ReadOnly: true})
	mustClose(t, r2)
	mustClose(t, j)
	mustClose(t, r)
}

// TestReaderRacesOwnerStart: a read-only Open finds no owner and starts
// its full scan; an owner process starts meanwhile and appends while the
// scan reads (it also repairs the torn tail its predecessor's SIGKILL
// left). The reader probes again, finds it, and reads again up to its
// watermark: never an error, never past the watermark.
func TestReaderRacesOwnerStart(t *testing.T) {
	dir := smallLog(t)
	for round := range 6 {
		var c *child
		seen := false
		readOnlyHook = func(point string, running bool) {
			switch {
			case point == "scan" && c == nil:
				c = startHelper(t, "JOURNAL_HELPER=append", "JOURNAL_DIR="+dir, "JOURNAL_WRITERS=16",
					"JOURNAL_SEGMENT_SIZE=65536")
				c.firstLine(t, "ack")
				go func() {
					for range c.lines {
					}
				}()
			case point == "probed-again":
				seen = running
			}
		}
		r, err := Open(dir, Options{ReadOnly: true})
		readOnlyHook = nil
		if err != nil {
			t.Fatalf("round %d: read-only Open while the owner started: %v", round, err)
		}
		if !seen {
			t.Fatalf("round %d: the second probe did not find the owner", round)
		}
		last := r.LastSeq()
		n := len(collect(t, r, 1))
		for _, rec := range r.Recoveries() {
			if rec.State == RecoveryUnrepaired {
				t.Fatalf("round %d: the live read reports a torn tail %+v", round, rec)
			}
		}
		mustClose(t, r)
		w := mustWatermark(t, dir)
		c.cmd.Process.Kill()
		c.cmd.Wait()
		if uint64(n) != last || last > w.Seq || last < 4 {
			t.Fatalf("round %d: read %d records to seq %d, watermark at %d", round, n, last, w.Seq)
		}
	}
	mustClose(t, mustOpen(t, dir, testOptions()))
}

// TestWatermarkRereads: a read that overlaps the owner's rewrite sees a
// torn watermark; it is read again, up to watermarkReads times.
func TestWatermarkRereads(t *testing.T) {
	w := watermark{Seq: 9, Segment: 1, End: 900}
	good := w.encode()
	torn := good
	torn[10] ^= 0xff
	for _, tornReads := range []int{watermarkReads - 1, watermarkReads} {
		reads := 0
		got, ok := decodeRereading(func(b []byte) (int, error) {
			reads++
			if reads <= tornReads {
				return copy(b, torn[:]), nil
			}
			return copy(b, good[:]), nil
		})
		if want := tornReads < watermarkReads; ok != want || ok && got != w {
			t.Fatalf("%d torn reads: %+v, %v; want ok %v", tornReads, got, ok, want)
		}
	}
}

// TestMarkWindowBound: the frame of a mark's record is looked for first in
// the markWindow bytes before its end, then up to the largest frame: marks
// at records whose frames are markWindow-1, markWindow and markWindow+1
// bytes all open.
func TestMarkWindowBound(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 256 << 10
	j := mustOpen(t, dir, opts)
	var marks []Mark
	for _, frame := range []int{markWindow - 1, markWindow, markWindow + 1} {
		mustAppend(t, j, "tick", tick{N: 1})
		mustAppend(t, j, "blob", bodyForFrame(t, j, "blob", frame))
		m := j.Mark()
		fr := frames(t, filepath.Join(dir, segName(m.Segment)))
		if got := fr[len(fr)-1]; got.off+got.len != m.End || got.len != int64(frame) {
			t.Fatalf("the mark's record has a %d-byte frame, want %d", got.len, frame)
		}
		marks = append(marks, m)
	}
	mustAppend(t, j, "tick", tick{N: 2})
	mustClose(t, j)
	for _, m := range marks {
		o := opts
		o.From = &m
		k := mustOpen(t, dir, o)
		if k.LastSeq() != 8 {
			t.Fatalf("from the mark at seq %d: seq %d, want 8", m.Seq, k.LastSeq())
		}
		mustClose(t, k)
	}
}
