package audit

import (
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
)

// FuzzPoint: a point file may come from anyone, and its envelope and
// content are decoded before anything in it is trusted: neither decoder
// nor the state's checks (restore) may panic, whatever the bytes. The
// seeds are a point a real host's verify wrote (testdata/fuzz/FuzzPoint)
// and one made here, whole and as its content alone (what a signature
// the fuzzer cannot forge would let through).
func FuzzPoint(f *testing.F) {
	key, err := wire.GenerateHybridKey()
	if err != nil {
		f.Fatal(err)
	}
	pub := key.Public()
	cfg := hostlog.Config(pub)
	m := journal.Mark{Seq: 7, Head: make([]byte, 32), Segment: 1, End: 4096, Owner: hostlog.Owner, Format: hostlog.Format,
		Config: cfg, Rebinds: 0, SegmentSize: 1 << 20}
	st := pointState{Records: 7, Chain: pointChain{Head: make([]byte, 32), RecentFirst: 1}}
	b, err := encodePoint(pub, m, st, func(d []byte) ([]byte, error) { return wire.SignHybrid(key, d) })
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	if pf, err := decodePointFile(b); err == nil {
		f.Add(pf.Content)
	}
	if seeds, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzPoint", "*")); len(seeds) == 0 {
		f.Log("no seed corpus in testdata/fuzz/FuzzPoint")
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := openPoint("fuzz", b, pub); err == nil {
			if _, err := restore(pub, p.state); err != nil {
				return
			}
		}
		decodePointFile(b)
		var c pointContent
		if pointDec.Unmarshal(b, &c) == nil {
			restore(pub, c.State)
		}
	})
}

// TestPointBound: a file past MaxPointBytes is refused before it is
// decoded.
func TestPointBound(t *testing.T) {
	if _, err := decodePointFile(make([]byte, MaxPointBytes+1)); err == nil {
		t.Fatal("a point past the bound was decoded")
	}
}
