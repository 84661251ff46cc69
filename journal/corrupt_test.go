package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flipEveryBit flips each bit of span in the segment file in turn and checks
// that Open (read-write and read-only) refuses with a *CorruptError at
// span.off and leaves the directory as it was.
func flipEveryBit(t *testing.T, dir, name string, span frameSpan, opts Options) {
	flipBits(t, dir, name, span, opts, 1)
}

// flipBits is flipEveryBit for every stride-th bit of the payload (every
// header bit is always flipped).
func flipBits(t *testing.T, dir, name string, span frameSpan, opts Options, stride int64) {
	t.Helper()
	seg := filepath.Join(dir, name)
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for bit := span.off * 8; bit < (span.off+span.len)*8; bit++ {
		if bit >= (span.off+headerSize)*8 && bit%stride != 0 {
			continue
		}
		b := bytes.Clone(orig)
		b[bit/8] ^= 1 << (bit % 8)
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, dir)
		j, err := Open(dir, opts)
		if err == nil {
			j.Close()
			t.Fatalf("bit %d of byte %d flipped: Open succeeded", bit%8, bit/8)
		}
		ce := wantCorrupt(t, err, seg, span.off)
		if !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "offset") {
			t.Fatalf("error %q does not name the segment and offset", err)
		}
		if !sameFiles(before, snapshot(t, dir)) {
			t.Fatalf("bit %d: a refused Open changed the directory (%v)", bit, ce)
		}
		ro := opts
		ro.ReadOnly = true
		if _, err := Open(dir, ro); err == nil {
			t.Fatalf("bit %d: read-only Open succeeded", bit)
		} else {
			wantCorrupt(t, err, seg, span.off)
		}
	}
	if err := os.WriteFile(seg, orig, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestBitFlipMiddleRecord(t *testing.T) {
	dir := smallLog(t)
	fr := frames(t, filepath.Join(dir, segName(1)))
	// Every bit of a middle record; the header and every 5th payload bit
	// of the first record (the bind record).
	flipEveryBit(t, dir, segName(1), fr[2], testOptions())
	flipBits(t, dir, segName(1), fr[0], testOptions(), 5)
	// Restored, it opens.
	mustClose(t, mustOpen(t, dir, testOptions()))
}

func TestBitFlipNonLastSegment(t *testing.T) {
	dir := journalDir(t)
	opts := testOptions()
	opts.SegmentSize = 512
	j := mustOpen(t, dir, opts)
	for len(j.Summary().Segments) < 3 {
		mustAppend(t, j, "tick", tick{Note: strings.Repeat("y", 30)})
	}
	segs := j.Summary().Segments
	mustClose(t, j)
	// The last record of the middle segment has valid records only in the
	// next segment: still corruption, because it is not the last segment.
	fr := frames(t, filepath.Join(dir, segs[1].Name))
	flipEveryBit(t, dir, segs[1].Name, fr[len(fr)-1], opts)
	// A non-zero byte in the zero-filled end of a segment that is not the last.
	seg := filepath.Join(dir, segs[1].Name)
	b, _ := os.ReadFile(seg)
	end := fr[len(fr)-1].off + fr[len(fr)-1].len
	b[len(b)-1] = 1
	os.WriteFile(seg, b, 0o600)
	_, err := Open(dir, opts)
	if ce := wantCorrupt(t, err, seg, end); !strings.Contains(ce.Reason, "not the last segment") {
		t.Fatalf("reason %q", ce.Reason)
	}
}

// craft is a record to write into a hand-made log.
type craft struct {
	kind string
	body any
	seq  uint64 // when non-zero, overrides the seq (the chain still links)
}

// writeLog writes records as one segment with a correct hash chain.
func writeLog(t *testing.T, records []craft) string {
	t.Helper()
	dir := journalDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var seg []byte
	var prev [32]byte
	for i, r := range records {
		body, err := encMode.Marshal(r.body)
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(i + 1)
		if r.seq != 0 {
			seq = r.seq
		}
		payload := appendPayload(nil, seq, &prev, r.kind, 1000, body)
		h := make([]byte, headerSize)
		putHeader(h, payload)
		seg = append(append(seg, h...), payload...)
		prev = sha256.Sum256(payload)
	}
	seg = append(seg, make([]byte, 4096-len(seg))...)
	if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func goodBind() bindBody {
	c := []byte(`{"a":1}`)
	sum := sha256.Sum256(c)
	return bindBody{Owner: "o", Format: "f", Binding: sum[:], Config: c}
}

func TestCorruptMeaning(t *testing.T) {
	c := []byte(`{"a":1}`)
	d := []byte(`{"b":2}`)
	sumD := sha256.Sum256(d)
	wrongBind := goodBind()
	wrongBind.Binding = make([]byte, 32)
	emptyConfig := goodBind()
	emptyConfig.Config = []byte{}
	s := sha256.Sum256(nil)
	emptyConfig.Binding = s[:]
	noOwner := goodBind()
	noOwner.Owner = ""
	cases := map[string]struct {
		records []craft
		at      int // index of the refused record
		reason  string
	}{
		"first record not bind": {[]craft{{kind: "tick", body: 1}}, 0, `record 1 is kind "tick"`},
		"bind binding wrong":    {[]craft{{kind: "bind", body: wrongBind}}, 0, "not the SHA-256 of the config"},
		"bind config empty":     {[]craft{{kind: "bind", body: emptyConfig}}, 0, "config is empty"},
		"bind without owner":    {[]craft{{kind: "bind", body: noOwner}}, 0, "without owner"},
		"bind unknown field":    {[]craft{{kind: "bind", body: map[string]any{"owner": "o", "format": "f", "binding": goodBind().Binding, "config": c, "x": 1}}}, 0, "bind body"},
		"second bind":           {[]craft{{kind: "bind", body: goodBind()}, {kind: "tick", body: 1}, {kind: "bind", body: goodBind()}}, 2, "bind record at seq 3"},
		"rebind wrong before":   {[]craft{{kind: "bind", body: goodBind()}, {kind: "rebind", body: rebindBody{Before: d, After: d, Binding: sumD[:]}}, {kind: "tick", body: 1}}, 1, "before config is not the config in force"},
		"rebind config empty":   {[]craft{{kind: "bind", body: goodBind()}, {kind: "rebind", body: rebindBody{Before: c, After: []byte{}, Binding: s[:]}}}, 1, "config is empty"},
		"rebind wrong binding":  {[]craft{{kind: "bind", body: goodBind()}, {kind: "rebind", body: rebindBody{Before: c, After: d, Binding: make([]byte, 32)}}}, 1, "not the SHA-256"},
		"seq gap":               {[]craft{{kind: "bind", body: goodBind()}, {kind: "tick", body: 1, seq: 3}, {kind: "tick", body: 1}}, 1, "seq 3, want 2"},
		"seq gap at the end":    {[]craft{{kind: "bind", body: goodBind()}, {kind: "tick", body: 1, seq: 3}}, 1, "seq 3, want 2"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeLog(t, c.records)
			seg := filepath.Join(dir, segName(1))
			fr := frames(t, seg)
			_, err := Open(dir, Options{})
			ce := wantCorrupt(t, err, seg, fr[c.at].off)
			if !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("reason %q, want %q", ce.Reason, c.reason)
			}
		})
	}
	// A config is bytes the journal does not interpret: a bind and a
	// rebind whose configs are neither canonical nor JSON verify by their
	// hash alone.
	odd := goodBind()
	odd.Config = []byte(`{ "a":1 }`)
	sumOdd := sha256.Sum256(odd.Config)
	odd.Binding = sumOdd[:]
	opaque := []byte{0, 0xff, 'x'}
	sumOpaque := sha256.Sum256(opaque)
	dir := writeLog(t, []craft{{kind: "bind", body: odd}, {kind: "rebind", body: rebindBody{Before: odd.Config, After: opaque, Binding: sumOpaque[:]}}})
	j := mustOpen(t, dir, Options{Config: opaque})
	if string(j.Config()) != string(opaque) {
		t.Fatalf("config %q, want %q", j.Config(), opaque)
	}
	mustClose(t, j)

	// The same log with a correct rebind opens, and reports it.
	dir = writeLog(t, []craft{{kind: "bind", body: goodBind()}, {kind: "rebind", body: rebindBody{Before: c, After: d, Binding: sumD[:]}}})
	j = mustOpen(t, dir, Options{Config: d})
	defer mustClose(t, j)
	if s := j.Summary(); s.Rebinds != 1 || string(s.Config) != string(d) {
		t.Fatalf("summary %+v", s)
	}
}

// TestCorruptChainWithValidCRC rewrites a record so that its frame is valid
// but its prev no longer matches: corruption, even in the last record.
func TestCorruptChainWithValidCRC(t *testing.T) {
	for _, idx := range []int{2, 3} {
		dir := smallLog(t)
		seg := filepath.Join(dir, segName(1))
		b, _ := os.ReadFile(seg)
		f := frames(t, seg)[idx]
		var scratch []byte
		r, _, _, err := decodeFrame(b[f.off:], &scratch)
		if err != nil {
			t.Fatal(err)
		}
		var prev [32]byte
		copy(prev[:], r.Prev)
		prev[0] ^= 0xff
		payload := appendPayload(nil, r.Seq, &prev, r.Kind, r.At, r.Body)
		putHeader(b[f.off:], payload)
		copy(b[f.off+headerSize:], payload)
		os.WriteFile(seg, b, 0o600)
		_, err = Open(dir, testOptions())
		if ce := wantCorrupt(t, err, seg, f.off); !strings.Contains(ce.Reason, "prev") {
			t.Fatalf("record %d: reason %q", idx+1, ce.Reason)
		}
	}
}

func TestCorruptUndecodableWithValidCRC(t *testing.T) {
	dir := smallLog(t)
	seg := filepath.Join(dir, segName(1))
	b, _ := os.ReadFile(seg)
	f := frames(t, seg)[2]
	payload := b[f.off+headerSize : f.off+f.len]
	payload[len(payload)-33] = 0x57 // prev's length byte: 87, past the end of the payload
	putHeader(b[f.off:], payload)
	os.WriteFile(seg, b, 0o600)
	_, err := Open(dir, testOptions())
	if ce := wantCorrupt(t, err, seg, f.off); !strings.Contains(ce.Reason, "valid record follows") {
		t.Fatalf("reason %q", ce.Reason)
	}
}

func TestCorruptSegments(t *testing.T) {
	build := func(t *testing.T) (string, []SegmentSummary) {
		dir := journalDir(t)
		opts := testOptions()
		opts.SegmentSize = 512
		j := mustOpen(t, dir, opts)
		for len(j.Summary().Segments) < 3 {
			mustAppend(t, j, "tick", tick{Note: strings.Repeat("z", 30)})
		}
		defer mustClose(t, j)
		return dir, j.Summary().Segments
	}
	t.Run("missing middle segment", func(t *testing.T) {
		dir, segs := build(t)
		os.Remove(filepath.Join(dir, segs[1].Name))
		_, err := Open(dir, Options{})
		if ce := wantCorrupt(t, err, filepath.Join(dir, segs[2].Name), 0); !strings.Contains(ce.Reason, "continues at seq") {
			t.Fatalf("reason %q", ce.Reason)
		}
	})
	t.Run("missing first segment", func(t *testing.T) {
		dir, segs := build(t)
		os.Remove(filepath.Join(dir, segs[0].Name))
		_, err := Open(dir, Options{})
		wantCorrupt(t, err, filepath.Join(dir, segs[1].Name), 0)
	})
	t.Run("empty segment before the last", func(t *testing.T) {
		dir, segs := build(t)
		last := segs[2]
		moved := segName(last.FirstSeq + 1)
		os.Rename(filepath.Join(dir, last.Name), filepath.Join(dir, moved))
		os.WriteFile(filepath.Join(dir, last.Name), make([]byte, 512), 0o600)
		_, err := Open(dir, Options{})
		if ce := wantCorrupt(t, err, filepath.Join(dir, last.Name), 0); !strings.Contains(ce.Reason, "no records") {
			t.Fatalf("reason %q", ce.Reason)
		}
	})
	t.Run("segment named for seq 0", func(t *testing.T) {
		dir, _ := build(t)
		os.WriteFile(filepath.Join(dir, segName(0)), nil, 0o600)
		_, err := Open(dir, Options{})
		wantCorrupt(t, err, filepath.Join(dir, segName(0)), 0)
	})
	t.Run("segment is a symlink", func(t *testing.T) {
		dir, segs := build(t)
		p := filepath.Join(dir, segs[2].Name)
		os.Rename(p, p+".real")
		os.Symlink(p+".real", p)
		if _, err := Open(dir, Options{}); err == nil || errors.Is(err, ErrCorrupt) {
			t.Fatalf("symlinked segment: %v, want an open error", err)
		}
	})
}
