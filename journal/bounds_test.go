package journal

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/internal/cborhead"
)

// snapshot returns the contents of every file in dir.
func snapshot(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameFiles(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return bytes.Equal(x, y) })
}

// refused checks that an append failed with want, that its message names
// bound, and that nothing was written.
func refused(t *testing.T, j *Journal, err, want error, bound string, before map[string][]byte, lastSeq uint64) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
	if !strings.Contains(err.Error(), bound) {
		t.Fatalf("error %q does not name the bound %q", err, bound)
	}
	if j.LastSeq() != lastSeq {
		t.Fatalf("LastSeq moved to %d after a refused append", j.LastSeq())
	}
	if after := snapshot(t, j.Dir()); !sameFiles(before, after) {
		t.Fatalf("a refused append changed the directory")
	}
}

func TestKindBounds(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	defer mustClose(t, j)
	at := strings.Repeat("k", MaxKindBytes)
	if _, err := j.Append(at, 1); err != nil {
		t.Fatalf("kind of %d bytes refused: %v", MaxKindBytes, err)
	}
	if _, err := j.Append("A-z_0.9:/x", 1); err != nil {
		t.Fatalf("kind using every allowed class refused: %v", err)
	}
	before, last := snapshot(t, j.Dir()), j.LastSeq()
	for _, kind := range []string{at + "k", "", "a b", "é", "a\n", "bind", "rebind"} {
		_, err := j.Append(kind, 1)
		bound := "A-Za-z0-9._:/-"
		if kind == "bind" || kind == "rebind" {
			bound = "reserved"
		}
		refused(t, j, err, ErrInvalidRecord, bound, before, last)
	}
	if seq := mustAppend(t, j, "tick", 1); seq != last+1 {
		t.Fatalf("append after refusals = seq %d, want %d", seq, last+1)
	}
}

func TestBodyLimits(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	array := func(n int) []int { return make([]int, n) }
	mapOf := func(n int) map[int]int {
		m := make(map[int]int, n)
		for i := 0; i < n; i++ {
			m[i] = i
		}
		return m
	}
	okBodies := map[string]any{
		"nesting at the limit": nest(MaxNestedLevels - 1),
		"array at the limit":   array(MaxArrayElements),
		"map at the limit":     mapOf(MaxMapPairs),
	}
	for name, body := range okBodies {
		if _, err := j.Append("tick", body); err != nil {
			t.Fatalf("%s refused: %v", name, err)
		}
	}
	before, last := snapshot(t, dir), j.LastSeq()
	overBodies := map[string]struct {
		body  any
		bound string
	}{
		"nesting one over": {nest(MaxNestedLevels), "15 nesting levels"},
		"array one over":   {array(MaxArrayElements + 1), "4096 array elements"},
		"map one over":     {mapOf(MaxMapPairs + 1), "4096 map pairs"},
		"raw not cbor":     {cbor.RawMessage{0xff}, "encode tick body"},
		"raw two items":    {cbor.RawMessage{0x01, 0x02}, "encode tick body"},
		"raw too deep":     {rawNest(MaxNestedLevels), "outside the record limits"},
		"unencodable":      {make(chan int), "encode tick body"},
	}
	for name, c := range overBodies {
		_, err := j.Append("tick", c.body)
		t.Run(name, func(t *testing.T) { refused(t, j, err, ErrInvalidRecord, c.bound, before, last) })
	}
	mustClose(t, j)
	// What was accepted at the limits reads back.
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if got := len(collect(t, j, 2)); got != len(okBodies) {
		t.Fatalf("%d records after reopen, want %d", got, len(okBodies))
	}
}

// rawNest is nest(levels) already encoded, so only Append's own check sees it.
func rawNest(levels int) cbor.RawMessage {
	b, err := encMode.Marshal(nest(levels))
	if err != nil {
		panic(err)
	}
	return b
}

func TestRecordSizeBound(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	seq := j.LastSeq() + 1
	at := time.Now().UnixMilli()
	// Find the []byte body whose record payload is exactly MaxRecordBytes.
	s := MaxRecordBytes
	for payloadSize(seq, "big", at, s+cborhead.Len(uint64(s))) > MaxRecordBytes {
		s--
	}
	if payloadSize(seq, "big", at, s+cborhead.Len(uint64(s))) != MaxRecordBytes {
		t.Fatal("no body size gives a payload of exactly MaxRecordBytes")
	}
	before, last := snapshot(t, dir), j.LastSeq()
	_, err := j.Append("big", make([]byte, s+1))
	refused(t, j, err, ErrRecordTooLarge, "MaxRecordBytes (4194304)", before, last)
	got, err := j.Append("big", bytes.Repeat([]byte{0xab}, s))
	if err != nil {
		t.Fatalf("record of exactly MaxRecordBytes refused: %v", err)
	}
	if got != seq {
		t.Fatalf("seq %d, want %d", got, seq)
	}
	// Larger than SegmentSize: it got a segment of its own, and the next
	// small record rotates again.
	next := mustAppend(t, j, "tick", 1)
	mustClose(t, j)
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	segs := j.Summary().Segments
	if len(segs) != 3 || segs[1].FirstSeq != seq || segs[1].Size != headerSize+MaxRecordBytes || segs[2].FirstSeq != next {
		t.Fatalf("segments %+v, want the big record alone in a segment of its frame size", segs)
	}
	recs := collect(t, j, seq)
	var body []byte
	if err := cbor.Unmarshal(recs[0].Body, &body); err != nil || len(body) != s || body[s-1] != 0xab {
		t.Fatalf("big record body: %d bytes, %v", len(body), err)
	}
}
