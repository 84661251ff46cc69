package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var reboundConfig = []byte(`{"name":"test","limits":{"a":1,"b":3}}`)

// markedLog writes a log with rotations (600-byte segments) and a rebind
// in the middle, takes the mark after every record, and returns the
// closed directory, its options (bound to the config in force at the end)
// and the marks by seq.
func markedLog(t *testing.T) (string, Options, map[uint64]Mark) {
	t.Helper()
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 600
	j := mustOpen(t, dir, opts)
	marks := map[uint64]Mark{1: j.Mark()}
	for i := range 40 {
		if i == 17 {
			if _, err := j.Rebind(reboundConfig); err != nil {
				t.Fatal(err)
			}
		} else {
			mustAppend(t, j, "tick", tick{N: i, Note: strings.Repeat("m", i%7*9)})
		}
		m := j.Mark()
		marks[m.Seq] = m
	}
	mustClose(t, j)
	opts.Config = reboundConfig
	return dir, opts, marks
}

// markKinds names the kinds of point a mark is at, so that a test can
// check it covered each.
func markKinds(m Mark, dir string, kind string) []string {
	var out []string
	switch {
	case m.Seq == 1:
		out = append(out, "empty-after-bind")
	case m.Seq == m.Segment && m.Segment > 1:
		out = append(out, "after-rotation")
	default:
		out = append(out, "mid-segment")
	}
	if _, err := os.Stat(filepath.Join(dir, segName(m.Seq+1))); err == nil {
		out = append(out, "segment-end")
	}
	if kind == kindRebind {
		out = append(out, "after-rebind")
	}
	return out
}

// TestOpenFromEveryMark opens a copy of the log from the mark after every
// record and checks that it is the log a full Open finds: last seq, head,
// binding, mark, OnRecord's records (Iterate's after the mark, places
// included), and the appends after it.
func TestOpenFromEveryMark(t *testing.T) {
	dir, opts, marks := markedLog(t)
	full := mustOpen(t, copyDir(t, dir), opts)
	all := collect(t, full, 1)
	wantMark := full.Mark()
	seen := map[string]bool{}
	for seq := uint64(1); seq <= uint64(len(all)); seq++ {
		m := marks[seq]
		for _, k := range markKinds(m, dir, all[seq-1].Kind) {
			seen[k] = true
		}
		d := copyDir(t, dir)
		var got []Record
		o := opts
		o.From, o.ReadOnly = &m, true
		o.OnRecord = func(r Record) error { got = append(got, r); return nil }
		r, err := Open(d, o)
		if err != nil {
			t.Fatalf("read-only Open from the mark at seq %d: %v", seq, err)
		}
		if r.LastSeq() != full.LastSeq() || r.Head() != full.Head() || len(got) != len(all)-int(seq) {
			t.Fatalf("read-only from the mark at seq %d: seq %d, %d records handed", seq, r.LastSeq(), len(got))
		}
		mustClose(t, r)
		got = nil
		o.ReadOnly = false
		j, err := Open(d, o)
		if err != nil {
			t.Fatalf("Open from the mark at seq %d: %v", seq, err)
		}
		if !reflect.DeepEqual(got, all[seq:]) && !(len(got) == 0 && len(all[seq:]) == 0) {
			t.Fatalf("from the mark at seq %d OnRecord got %d records, want Iterate's %d after it", seq, len(got), len(all[seq:]))
		}
		if j.LastSeq() != full.LastSeq() || j.Head() != full.Head() || j.Binding() != full.Binding() ||
			!bytes.Equal(j.Config(), full.Config()) || j.Owner() != full.Owner() || j.Format() != full.Format() ||
			j.SegmentSize() != full.SegmentSize() || j.Summary().Rebinds != full.Summary().Rebinds {
			t.Fatalf("from the mark at seq %d: %+v, want the full open's %+v", seq, j.Summary(), full.Summary())
		}
		if gm := j.Mark(); !reflect.DeepEqual(gm, wantMark) {
			t.Fatalf("from the mark at seq %d, Mark() %+v, want %+v", seq, gm, wantMark)
		}
		checkSameAppends(t, j, d, dir, opts)
	}
	mustClose(t, full)
	for _, k := range []string{"empty-after-bind", "mid-segment", "segment-end", "after-rotation", "after-rebind"} {
		if !seen[k] {
			t.Errorf("no mark %s was tried", k)
		}
	}
}

// checkSameAppends appends the same records to j (opened from a mark in
// d) and to a full open of another copy of base, and checks that they
// take the same places and that d then opens in full.
func checkSameAppends(t *testing.T, j *Journal, d, base string, opts Options) {
	t.Helper()
	ref := mustOpen(t, copyDir(t, base), opts)
	defer mustClose(t, ref)
	for i := range 12 {
		body := tick{N: 1000 + i, Note: strings.Repeat("a", 40)}
		p1, err1 := j.AppendAt("tick", body)
		p2, err2 := ref.AppendAt("tick", body)
		if err1 != nil || err2 != nil || p1 != p2 {
			t.Fatalf("append %d after the mark: %+v, %v; the full open's: %+v, %v", i, p1, err1, p2, err2)
		}
	}
	mustClose(t, j)
	k := mustOpen(t, d, opts)
	defer mustClose(t, k)
	if k.LastSeq() != ref.LastSeq() {
		t.Fatalf("after appends, a full open finds seq %d, want %d", k.LastSeq(), ref.LastSeq())
	}
}

// wantMismatch checks that err is one line matching ErrMarkMismatch and
// naming what, that the directory is as it was, and that it still opens
// in full.
func wantMismatch(t *testing.T, err error, what string, dir string, before map[string][]byte, opts Options) {
	t.Helper()
	if !errors.Is(err, ErrMarkMismatch) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: %v, want ErrMarkMismatch", what, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("%s: error of more than one line: %q", what, err)
	}
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatalf("%s: a refused Open changed the directory", what)
	}
	mustClose(t, mustOpen(t, dir, opts))
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatalf("%s: the full open after it changed the directory", what)
	}
}

// markMutations are wrong marks made from a right one m: each field wrong
// on its own, and each bound one past.
func markMutations(m Mark, segSize int64, prevSeg, absentSeg uint64) map[string]Mark {
	out := map[string]Mark{}
	mut := func(name string, f func(*Mark)) {
		c := m
		c.Head, c.Config, c.Binding = bytes.Clone(m.Head), bytes.Clone(m.Config), bytes.Clone(m.Binding)
		f(&c)
		out[name] = c
	}
	mut("seq+1", func(c *Mark) { c.Seq++ })
	mut("seq-1", func(c *Mark) { c.Seq-- })
	mut("seq 0", func(c *Mark) { c.Seq = 0 })
	mut("head flipped", func(c *Mark) { c.Head[5] ^= 1 })
	mut("head short", func(c *Mark) { c.Head = c.Head[:31] })
	mut("segment earlier", func(c *Mark) { c.Segment = prevSeg })
	mut("segment absent", func(c *Mark) { c.Segment = absentSeg })
	mut("segment earlier, end at its size", func(c *Mark) { c.Segment, c.End = prevSeg, segSize })
	mut("segment 0", func(c *Mark) { c.Segment = 0 })
	mut("segment past seq", func(c *Mark) { c.Segment = c.Seq + 1 })
	mut("end+1", func(c *Mark) { c.End++ })
	mut("end-1", func(c *Mark) { c.End-- })
	mut("end past the segment", func(c *Mark) { c.End = segSize + 1 })
	mut("end too small for its records", func(c *Mark) { c.End = minFrame*int64(c.Seq-c.Segment+1) - 1 })
	mut("end past MaxSegmentSize", func(c *Mark) { c.End = MaxSegmentSize + 1 })
	mut("owner", func(c *Mark) { c.Owner = "someone-else" })
	mut("no owner", func(c *Mark) { c.Owner = "" })
	mut("format", func(c *Mark) { c.Format = "other-format-v1" })
	mut("config and binding", func(c *Mark) {
		c.Config = []byte(`{"other":1}`)
		sum := sha256.Sum256(c.Config)
		c.Binding = sum[:]
	})
	mut("config alone", func(c *Mark) { c.Config = []byte(`{"other":1}`) })
	mut("binding alone", func(c *Mark) { c.Binding[0] ^= 1 })
	mut("rebinds -1", func(c *Mark) { c.Rebinds = -1 })
	mut("rebinds = seq", func(c *Mark) { c.Rebinds = int(c.Seq) })
	mut("segment size", func(c *Mark) { c.SegmentSize = segSize + 1 })
	mut("segment size 0", func(c *Mark) { c.SegmentSize = 0 })
	mut("segment size past MaxSegmentSize", func(c *Mark) { c.SegmentSize = MaxSegmentSize + 1 })
	return out
}

// TestOpenFromMismatch: every wrong field of a mark is refused with
// ErrMarkMismatch, read-write and read-only, and the directory is left
// byte for byte as it was.
func TestOpenFromMismatch(t *testing.T) {
	dir, opts, marks := markedLog(t)
	// A mark in the middle of a segment that is not the last, after the
	// rebind, and one at the bind record and at the rebind.
	var mid, rebind Mark
	for _, m := range marks {
		inside := marks[m.Seq+1].Segment == m.Segment && m.Seq != m.Segment
		if m.Seq > 25 && inside && m.Rebinds == 1 && (mid.Seq == 0 || m.Seq < mid.Seq) {
			mid = m
		}
		if m.Rebinds == 1 && (rebind.Seq == 0 || m.Seq < rebind.Seq) {
			rebind = m
		}
	}
	cases := map[string]Mark{}
	prevSeg := marks[mid.Segment-1].Segment
	for name, m := range markMutations(mid, opts.SegmentSize, prevSeg, mid.Segment+1) {
		cases["mid/"+name] = m
	}
	bind := marks[1]
	bindOpts := opts
	for name, m := range map[string]Mark{
		"bind/segment size": func() Mark { c := bind; c.SegmentSize = 4096; return c }(),
		"bind/owner":        func() Mark { c := bind; c.Owner = "x"; return c }(),
		"rebind/rebinds 0":  func() Mark { c := rebind; c.Rebinds = 0; return c }(),
		"rebind/config": func() Mark {
			c := rebind
			c.Config = testConfig
			sum := sha256.Sum256(testConfig)
			c.Binding = sum[:]
			return c
		}(),
	} {
		cases[name] = m
	}
	for name, m := range cases {
		for _, ro := range []bool{false, true} {
			d := copyDir(t, dir)
			before := snapshot(t, d)
			o := opts
			if name == "bind/owner" {
				o = bindOpts
				o.Owner = ""
			}
			o.From, o.ReadOnly = &m, ro
			called := 0
			o.OnRecord = func(Record) error { called++; return nil }
			j, err := Open(d, o)
			if err == nil {
				j.Close()
				t.Fatalf("%s (read-only %v): Open from a wrong mark succeeded", name, ro)
			}
			wantMismatch(t, err, fmt.Sprintf("%s (read-only %v)", name, ro), d, before, opts)
			if called != 0 && !strings.HasPrefix(name, "mid/rebinds") {
				t.Logf("%s: OnRecord was called %d times before the mismatch (to be discarded)", name, called)
			}
		}
	}
	// The right marks open.
	for _, m := range []Mark{mid, rebind, bind} {
		o := opts
		o.From = &m
		mustClose(t, mustOpen(t, copyDir(t, dir), o))
	}
}

// TestOpenFromMismatchElsewhere: marks that fail for the log around them:
// no directory, a mark of another log, a record after the mark that does
// not chain on it, a rebind after the mark from another config.
func TestOpenFromMismatchElsewhere(t *testing.T) {
	dir, opts, marks := markedLog(t)
	m := marks[10]
	o := opts
	o.From = &m
	if _, err := Open(filepath.Join(t.TempDir(), "none"), o); !errors.Is(err, ErrMarkMismatch) {
		t.Fatalf("no directory: %v", err)
	}

	// Another log, same owner, format and config.
	other, _, otherMarks := markedLog(t)
	om := otherMarks[10]
	o.From = &om
	d := copyDir(t, dir)
	before := snapshot(t, d)
	_, err := Open(d, o)
	wantMismatch(t, err, "a mark of another log", d, before, opts)
	_ = other

	// A valid frame at the mark's end that does not chain on it.
	d = copyDir(t, dir)
	seg := filepath.Join(d, segName(m.Segment))
	var prev [hashSize]byte
	body, _ := encMode.Marshal(tick{N: 1})
	payload := appendPayload(nil, m.Seq+5, &prev, "tick", 1, body)
	frame := append(make([]byte, headerSize), payload...)
	putHeader(frame, payload)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(frame, m.End); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before = snapshot(t, d)
	o.From = &m
	_, err = Open(d, o)
	if !errors.Is(err, ErrMarkMismatch) || !sameFiles(before, snapshot(t, d)) {
		t.Fatalf("a frame at the mark's end that does not chain: %v", err)
	}
	if _, err := Open(d, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the full open of that log: %v, want corrupt", err)
	}
}

// TestOpenFromTornTail: a torn tail after the mark, and one right at it,
// is repaired as a full open repairs it.
func TestOpenFromTornTail(t *testing.T) {
	dir, opts, marks := markedLog(t)
	full := mustOpen(t, dir, opts)
	for range 3 {
		mustAppend(t, full, "t", 1)
		marks[full.LastSeq()] = full.Mark()
	}
	last := full.LastSeq()
	lastMark := full.Mark()
	mustClose(t, full)
	seg := filepath.Join(dir, segName(lastMark.Segment))
	fr := frames(t, seg)
	if len(fr) < 3 {
		t.Fatalf("last segment holds %d records; want 3 or more", len(fr))
	}
	tear := fr[len(fr)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[tear.off+tear.len/2 : tear.off+tear.len])
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]Mark{"before": marks[last-2], "at": marks[last-1]} {
		d, ref := copyDir(t, dir), copyDir(t, dir)
		o := opts
		o.From = &m
		j := mustOpen(t, d, o)
		k := mustOpen(t, ref, opts)
		if j.LastSeq() != last-1 || k.LastSeq() != last-1 || j.Head() != k.Head() {
			t.Fatalf("torn tail %s the mark: from it seq %d, full %d, want %d", name, j.LastSeq(), k.LastSeq(), last-1)
		}
		if !reflect.DeepEqual(j.Recoveries(), k.Recoveries()) || len(j.Recoveries()) != 1 || j.Recoveries()[0].State != RecoveryMoved {
			t.Fatalf("torn tail %s the mark: recoveries %+v, the full open's %+v", name, j.Recoveries(), k.Recoveries())
		}
		mustClose(t, j)
		mustClose(t, k)
		if !sameFiles(snapshot(t, d), snapshot(t, ref)) {
			t.Fatalf("torn tail %s the mark: the repaired directory differs from the full open's", name)
		}
	}
}

// TestOpenFromSkipsEarlierSegments: the segments before the mark's are
// not read: damage there is not seen (a full open refuses it), and the
// summary counts them from their names.
func TestOpenFromSkipsEarlierSegments(t *testing.T) {
	dir, opts, marks := markedLog(t)
	var m Mark
	for _, c := range marks {
		if c.Segment > m.Segment || c.Segment == m.Segment && c.Seq > m.Seq {
			m = c
		}
	}
	first := filepath.Join(dir, segName(1))
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0xff
	if err := os.WriteFile(first, b, 0o600); err != nil {
		t.Fatal(err)
	}
	o := opts
	o.From = &m
	j := mustOpen(t, dir, o)
	s := j.Summary()
	mustClose(t, j)
	if s.Records != m.Seq || s.Segments[0].Records != s.Segments[1].FirstSeq-1 || s.Segments[0].Used != s.Segments[0].Size {
		t.Fatalf("summary from names: %+v", s)
	}
	if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("full open of the damaged first segment: %v, want corrupt", err)
	}
}

// TestRebindsBound: Rebinds may be seq-1 (a log of nothing but rebinds)
// and not seq.
func TestRebindsBound(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	j := mustOpen(t, dir, opts)
	for _, c := range [][]byte{reboundConfig, testConfig} {
		if _, err := j.Rebind(c); err != nil {
			t.Fatal(err)
		}
	}
	m := j.Mark()
	mustClose(t, j)
	if m.Seq != 3 || m.Rebinds != 2 {
		t.Fatalf("mark %+v, want seq 3 with 2 rebinds", m)
	}
	o := opts
	o.From = &m
	mustClose(t, mustOpen(t, dir, o))
	m.Rebinds = 3
	before := snapshot(t, dir)
	_, err := Open(dir, o)
	wantMismatch(t, err, "rebinds = seq", dir, before, opts)
}
