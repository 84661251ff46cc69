package ledger

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzDecodeState from the journal of every kind")

// FuzzDecodeState decodes a snapshot's state as the controller does at
// start (another process wrote the file): it never panics, a state it
// takes encodes, and that encoding decodes to a ledger that encodes the
// same (one state, one encoding), with and without an index.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte{0xa0})
	f.Add(stateWith("day", []byte{0x01}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, x := range []Index{nil, Discard()} {
			l, err := DecodeState(StateVersion, b, x)
			if err != nil {
				continue
			}
			enc, err := l.Encode()
			if err != nil {
				t.Fatalf("a state Decode took does not encode: %v", err)
			}
			again, err := DecodeState(StateVersion, enc, x)
			if err != nil {
				t.Fatalf("the encoding of a decoded state does not decode: %v", err)
			}
			if enc2, err := again.Encode(); err != nil || !bytes.Equal(enc2, enc) {
				t.Fatalf("the state encodes otherwise the second time (%v)", err)
			}
		}
	})
}

// TestFuzzSeeds writes (with -update-fuzz-seeds) and checks the seed
// corpus: the states a replay of the journal of every kind gives at each
// of its records, with and without an index, each decoding.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeState")
	if *updateSeeds {
		recs := records(t, allKindsJournal(t))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		plain, indexed := New(), NewIndexed(newIndex(t))
		for i, r := range recs {
			for name, l := range map[string]*Ledger{"plain": plain, "indexed": indexed} {
				if err := l.Apply(r); err != nil {
					t.Fatal(err)
				}
				if i%4 != 3 && i != len(recs)-1 {
					continue
				}
				seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", encode(t, l))
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d", name, r.Seq)), []byte(seed), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	des, err := os.ReadDir(dir)
	if err != nil || len(des) < 10 {
		t.Fatalf("the seed corpus of FuzzDecodeState: %d files, %v (run with -update-fuzz-seeds)", len(des), err)
	}
}
