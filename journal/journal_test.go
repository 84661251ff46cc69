package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func TestAppendIterateReopen(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	if got := j.LastSeq(); got != 1 {
		t.Fatalf("new journal LastSeq = %d, want 1 (the bind record)", got)
	}
	for i := 1; i <= 5; i++ {
		if seq := mustAppend(t, j, "tick", tick{N: i, Note: "héllo"}); seq != uint64(i+1) {
			t.Fatalf("Append #%d = seq %d, want %d", i, seq, i+1)
		}
	}
	head := j.Head()
	mustClose(t, j)

	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if j.LastSeq() != 6 || j.Head() != head {
		t.Fatalf("reopened: LastSeq %d head %x, want 6 %x", j.LastSeq(), j.Head(), head)
	}
	recs := collect(t, j, 0)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	var prev [32]byte
	for i, r := range recs {
		if r.Seq != uint64(i+1) || !bytes.Equal(r.Prev, prev[:]) {
			t.Fatalf("record %d: seq %d prev %x, want seq %d prev %x", i, r.Seq, r.Prev, i+1, prev)
		}
		var scratch []byte
		var p [32]byte
		copy(p[:], r.Prev)
		prev = sha256.Sum256(appendPayload(scratch, r.Seq, &p, r.Kind, r.At, r.Body))
		if i == 0 {
			if r.Kind != kindBind {
				t.Fatalf("record 1 kind %q", r.Kind)
			}
			continue
		}
		var tk tick
		if err := cbor.Unmarshal(r.Body, &tk); err != nil || tk.N != i || tk.Note != "héllo" || r.Kind != "tick" {
			t.Fatalf("record %d: kind %q body %+v err %v", r.Seq, r.Kind, tk, err)
		}
	}
	if prev != head {
		t.Fatalf("hash of the last payload %x, Head %x", prev, head)
	}
	if seq := mustAppend(t, j, "tick", tick{N: 6}); seq != 7 {
		t.Fatalf("append after reopen = %d, want 7", seq)
	}
	if recs := collect(t, j, 7); len(recs) != 1 || recs[0].Seq != 7 || !bytes.Equal(recs[0].Prev, head[:]) {
		t.Fatalf("record 7 = %+v, want prev %x", recs, head)
	}
}

func TestClosed(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	mustClose(t, j)
	if _, err := j.Append("tick", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if err := j.Iterate(1, func(Record) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Iterate after Close: %v, want ErrClosed", err)
	}
	if err := j.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}
