package appliance

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/snapshot"
)

// FuzzDecodeState: the decoder of a state read from a snapshot file never
// panics, and what it accepts is within its bound, consistent and
// exactly its own deterministic encoding (one state, one encoding). The
// seed corpus (testdata/fuzz/FuzzDecodeState) holds valid states and
// each kind of refusal.
func FuzzDecodeState(f *testing.F) {
	for _, w := range []wire{{Seq: 1}, {Seq: 2, Answers: 1, Origin: make([]byte, 32)}, {Seq: 1 << 40, Answers: 1<<40 - 1, Origin: bytes.Repeat([]byte{7}, 32)}} {
		b, err := stateEncMode.Marshal(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeWire(b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal of more than one line: %q", err)
			}
			return
		}
		again, err := stateEncMode.Marshal(w)
		if err != nil || !bytes.Equal(again, b) || len(b) > maxStateBytes {
			t.Fatalf("accepted %x, which encodes as %x (%v)", b, again, err)
		}
		if w.Seq == 0 || w.Answers >= w.Seq || (w.Seq >= 2) != (len(w.Origin) == sha256.Size) {
			t.Fatalf("accepted an inconsistent state %+v", w)
		}
	})
}

// TestStateRefusals: each refusal of the state decoder, with its exact
// error, the size bound one byte past it.
func TestStateRefusals(t *testing.T) {
	enc := func(v any) []byte {
		b, err := stateEncMode.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	origin := make([]byte, 32)
	// At the bound the size is not what refuses it.
	var atBound []byte
	for n := 32; len(atBound) < maxStateBytes; n++ {
		atBound = enc(wire{Seq: 2, Answers: 1, Origin: make([]byte, n)})
	}
	if len(atBound) != maxStateBytes {
		t.Fatalf("a state of %d bytes, not the bound", len(atBound))
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"one past the bound", make([]byte, maxStateBytes+1), "appliance state: 257 bytes exceeds the bound of 256"},
		{"at the bound", atBound, "appliance state: an origin of 232 bytes at record 2 (32 bytes from record 2 on, none before)"},
		{"unknown field", enc(map[string]any{"seq": 1, "answers": 0, "x": 1}), `appliance state: cbor: found unknown field at map element index 0`},
		{"not deterministic", []byte{0xa2, 0x63, 's', 'e', 'q', 0x18, 0x01, 0x67, 'a', 'n', 's', 'w', 'e', 'r', 's', 0x00}, "appliance state: not in its deterministic encoding"},
		{"a tag", []byte{0xc0, 0xa0}, "appliance state: cbor: CBOR tag isn't allowed"},
		{"seq 0", enc(wire{}), "appliance state: at record 0, before the journal's bind record"},
		{"an answer per record", enc(wire{Seq: 3, Answers: 3, Origin: origin}), "appliance state: 3 answers in 3 records, one of which is the bind record"},
		{"no origin past the bind record", enc(wire{Seq: 2, Answers: 1}), "appliance state: an origin of 0 bytes at record 2 (32 bytes from record 2 on, none before)"},
		{"an origin at the bind record", enc(wire{Seq: 1, Origin: origin}), "appliance state: an origin of 32 bytes at record 1 (32 bytes from record 2 on, none before)"},
		{"a short origin", enc(wire{Seq: 2, Origin: origin[:31]}), "appliance state: an origin of 31 bytes at record 2 (32 bytes from record 2 on, none before)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decodeWire(c.b); err == nil || err.Error() != c.want {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
		})
	}
	good := enc(wire{Seq: 2, Answers: 1, Origin: origin})
	for _, c := range []struct {
		s    snapshot.Snapshot
		want string
	}{
		{snapshot.Snapshot{Format: stateFormat, Version: 2, Mark: journal.Mark{Seq: 2}, State: good},
			`appliance state: format "steward-appliance-state" version 2; this appliance reads "steward-appliance-state" version 1`},
		{snapshot.Snapshot{Format: stateFormat, Version: stateVersion, Mark: journal.Mark{Seq: 3}, State: good},
			"appliance state: at record 2, but its snapshot's mark is record 3"},
	} {
		if _, err := decodeReplayState(c.s, nil, "test", nil); err == nil || err.Error() != c.want {
			t.Fatalf("got %v\nwant %s", err, c.want)
		}
	}
}

// TestEntryAndRecordBounds: an index entry of any other length or
// version, and an answer record whose request id is past its bound (81
// bytes), are refused with their exact errors.
func TestEntryAndRecordBounds(t *testing.T) {
	e := encodeEntry(entry{place: journal.Place{Seq: 2, Segment: 1, Offset: 100}})
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{append(bytes.Clone(e), 0), "an answer entry of 59 bytes, version 1; want 58 bytes, version 1"},
		{e[:57], "an answer entry of 57 bytes, version 1; want 58 bytes, version 1"},
		{append([]byte{2}, e[1:]...), "an answer entry of 58 bytes, version 2; want 58 bytes, version 1"},
	} {
		if _, err := decodeEntry(c.b); err == nil || err.Error() != c.want {
			t.Fatalf("got %v, want %s", err, c.want)
		}
	}
	if _, err := decodeEntry(e); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{80: "", 81: "journal test: record 2: requestId: 81 bytes exceeds the bound of 80"} {
		st := newReplayState(nil, "test", nil)
		st.Seq = 1
		body, _ := stateEncMode.Marshal(answerRecord{RequestID: strings.Repeat("r", n), BodySHA256: make([]byte, 32), Status: 200, Response: []byte("{}")})
		err := st.Apply(journal.Record{Seq: 2, Kind: kindAnswer, Prev: make([]byte, 32), Body: body, Place: journal.Place{Seq: 2, Segment: 1}})
		if (want == "") != (err == nil) || err != nil && err.Error() != want {
			t.Fatalf("a requestId of %d bytes: %v, want %q", n, err, want)
		}
	}
}

// TestSetAsideBound: past maxAside damaged copies beside the index a
// start is refused rather than deleting one; at the bound the last name
// is taken.
func TestSetAsideBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "answers.db")
	touch := func(p string) {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	touch(path + ".damaged")
	for n := 2; n < maxAside; n++ {
		touch(fmt.Sprintf("%s.%d.damaged", path, n))
	}
	touch(path)
	if err := setAside(path, quietLogger(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fmt.Sprintf("%s.%d.damaged", path, maxAside)); err != nil {
		t.Fatal(err)
	}
	touch(path)
	want := fmt.Sprintf("setting the damaged history index aside: %s: 100 damaged copies are kept beside it already; remove some", path)
	if err := setAside(path, quietLogger(t)); err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the index was not left in place: %v", err)
	}
}
