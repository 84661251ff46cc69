package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary bytes to the frame and record decoders.
// Whatever they accept must be exactly the deterministic encoding of what
// they return, within every limit.
func FuzzDecodeRecord(f *testing.F) {
	var prev [32]byte
	body, _ := encMode.Marshal(map[string]any{"n": 1, "s": "x"})
	payload := appendPayload(nil, 7, &prev, "tick", 1700000000000, body)
	frame := make([]byte, headerSize, headerSize+len(payload))
	putHeader(frame, payload)
	f.Add(append(frame, payload...))
	f.Add(payload)
	f.Fuzz(func(t *testing.T, data []byte) {
		var scratch []byte
		if r, p, n, err := decodeFrame(data, &scratch); err == nil {
			if n > len(data) || !bytes.Equal(p, data[headerSize:n]) {
				t.Fatalf("frame of %d bytes, payload %x", n, p)
			}
			checkDecoded(t, r, p)
		}
		if r, err := decodeRecord(data, &scratch); err == nil {
			checkDecoded(t, r, data)
		}
	})
}

func checkDecoded(t *testing.T, r Record, payload []byte) {
	t.Helper()
	if r.Seq == 0 || len(r.Prev) != hashSize || !validKind(r.Kind) {
		t.Fatalf("accepted %+v", r)
	}
	if err := bodyMode.Wellformed(r.Body); err != nil {
		t.Fatalf("accepted a body outside the limits: %v", err)
	}
	lib, err := encMode.Marshal(r)
	if err != nil || !bytes.Equal(lib, payload) {
		t.Fatalf("accepted %x, which re-encodes to %x (%v)", payload, lib, err)
	}
	if !bytes.HasPrefix(payload, payloadMagic) {
		t.Fatalf("accepted payload without the magic: %x", payload)
	}
}

// FuzzOpenSegment opens a journal whose only segment holds arbitrary bytes.
// Open must not panic; what it accepts must iterate cleanly, and after a
// read-write open (which may move a torn tail aside) a second open finds the
// same log with nothing left to repair.
func FuzzOpenSegment(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, seg []byte) {
		dir := filepath.Join(t.TempDir(), "j")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o600); err != nil {
			t.Fatal(err)
		}
		opts := Options{Owner: testOwner, Format: testFormat, SegmentSize: 4096}
		ro := opts
		ro.ReadOnly = true
		j, err := Open(dir, ro)
		if err != nil {
			if j, err2 := Open(dir, opts); err2 == nil {
				j.Close()
				t.Fatalf("read-only open refused (%v) what read-write accepts", err)
			}
			return
		}
		var n uint64
		if err := j.Iterate(1, func(r Record) error { n++; return nil }); err != nil || n != j.LastSeq() {
			t.Fatalf("iterated %d of %d records: %v", n, j.LastSeq(), err)
		}
		roLast := j.LastSeq()
		j.Close()
		if roLast > 0 {
			// An existing log is opened whatever it says its owner is.
			opts.Owner, opts.Format = "", ""
		}
		j, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("read-only open accepted what read-write refuses: %v", err)
		}
		last := j.LastSeq()
		if last != max(roLast, 1) {
			t.Fatalf("read-write open ends at %d, read-only at %d", last, roLast)
		}
		j.Close()
		j, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen after repair: %v", err)
		}
		defer j.Close()
		for _, r := range j.Recoveries() {
			if r.State != RecoveryEarlier {
				t.Fatalf("second open still repairs: %+v", r)
			}
		}
		if j.LastSeq() != last {
			t.Fatalf("second open ends at %d, first at %d", j.LastSeq(), last)
		}
	})
}

// readAtLog is the journal FuzzReadAt reads: the bind record and ten
// ticks in one segment, open read-write.
func readAtLog(tb testing.TB, dir string) (*Journal, []Record) {
	opts := testOptions()
	opts.SegmentSize = 64 << 10
	j, err := Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 10 {
		if _, err := j.Append("tick", tick{N: i, Note: strings.Repeat("f", i*3)}); err != nil {
			tb.Fatal(err)
		}
	}
	var recs []Record
	if err := j.Iterate(1, func(r Record) error { recs = append(recs, r); return nil }); err != nil {
		tb.Fatal(err)
	}
	return j, recs
}

// FuzzReadAt writes arbitrary bytes into the durable part of a segment at
// an offset (at, taken modulo the durable end) and reads an arbitrary
// place (segment, seq, offset). ReadAt must not panic; its error must be
// ErrBadPlace or a *CorruptError; a record it returns must be the frame at
// that place as the bytes now are, verified (length, CRC-32C, strict
// decoding) and of the place's seq.
func FuzzReadAt(f *testing.F) {
	j, recs := readAtLog(f, filepath.Join(f.TempDir(), "j"))
	defer j.Close()
	path := filepath.Join(j.Dir(), segName(1))
	orig, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	end := j.Mark().End
	for _, r := range recs {
		f.Add(uint8(1), uint8(r.Seq), uint16(r.Place.Offset), uint16(0), []byte{})
	}
	f.Fuzz(func(t *testing.T, seg, seq uint8, off, at uint16, data []byte) {
		pos := int64(at) % end
		data = data[:min(int64(len(data)), end-pos)]
		seg1, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer seg1.Close()
		if _, err := seg1.WriteAt(data, pos); err != nil {
			t.Fatal(err)
		}
		now := bytes.Clone(orig)
		copy(now[pos:], data)
		p := Place{Seq: uint64(seq), Segment: uint64(seg), Offset: int64(off)}
		rec, err := j.ReadAt(p)
		if _, werr := seg1.WriteAt(orig[pos:pos+int64(len(data))], pos); werr != nil {
			t.Fatal(werr)
		}
		var ce *CorruptError
		switch {
		case err != nil && !errors.Is(err, ErrBadPlace) && !errors.As(err, &ce):
			t.Fatalf("ReadAt(%+v): %v, want ErrBadPlace or a *CorruptError", p, err)
		case err != nil:
			return
		}
		var scratch []byte
		want, payload, _, derr := decodeFrame(now[p.Offset:end], &scratch)
		if derr != nil || want.Seq != p.Seq || rec.Place != p {
			t.Fatalf("ReadAt(%+v) returned record %d, but the frame there does not verify as it: %v", p, rec.Seq, derr)
		}
		want.Place = p
		if !reflect.DeepEqual(rec, want) {
			t.Fatalf("ReadAt(%+v) = %+v, the frame there is %+v", p, rec, want)
		}
		checkDecoded(t, rec, payload)
	})
}
