package cborhead

import (
	"bytes"
	"math"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestAppendAtEveryWidth: at each boundary of the head's width, and one
// past it, Append writes the shortest head, byte for byte, and Len says
// its length.
func TestAppendAtEveryWidth(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want []byte
	}{
		{0, []byte{0x40}},
		{23, []byte{0x57}},
		{24, []byte{0x58, 24}},
		{0xff, []byte{0x58, 0xff}},
		{0x100, []byte{0x59, 0x01, 0x00}},
		{0xffff, []byte{0x59, 0xff, 0xff}},
		{0x10000, []byte{0x5a, 0, 1, 0, 0}},
		{0xffffffff, []byte{0x5a, 0xff, 0xff, 0xff, 0xff}},
		{0x100000000, []byte{0x5b, 0, 0, 0, 1, 0, 0, 0, 0}},
		{math.MaxUint64, []byte{0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	} {
		got := Append([]byte{0xee}, MajorBytes, c.n)
		if !bytes.Equal(got[1:], c.want) || got[0] != 0xee {
			t.Errorf("Append(bytes, %d) = %x, want ee%x", c.n, got, c.want)
		}
		if Len(c.n) != len(c.want) {
			t.Errorf("Len(%d) = %d, want %d", c.n, Len(c.n), len(c.want))
		}
	}
}

// TestAppendIsTheLibrarys: for every major type that carries a plain
// argument, Append's head is the head the cbor library's core
// deterministic encoding writes (for integers, of Int's split).
func TestAppendIsTheLibrarys(t *testing.T) {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{0, 1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -24, -25, -256, -257, -65536, -65537, -math.MaxUint32 - 1, -math.MaxUint32 - 2, math.MinInt64} {
		want, err := enc.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		major, n := Int(v)
		if got := Append(nil, major, n); !bytes.Equal(got, want) {
			t.Errorf("int %d: %x, want %x", v, got, want)
		}
	}
	for _, n := range []int{0, 23, 24, 255, 256, 65535, 65536} {
		s := bytes.Repeat([]byte{'a'}, n)
		for _, c := range []struct {
			major byte
			v     any
		}{{MajorBytes, s}, {MajorText, string(s)}, {MajorArray, make([]uint16, n)}} {
			want, err := enc.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := Append(nil, c.major, uint64(n)); !bytes.Equal(got, want[:Len(uint64(n))]) {
				t.Errorf("major %d length %d: head %x, want %x", c.major, n, got, want[:Len(uint64(n))])
			}
		}
	}
	if got, want := Append(nil, MajorMap, 2), []byte{0xa2}; !bytes.Equal(got, want) {
		t.Errorf("map of 2: %x, want %x", got, want)
	}
	if got, want := Append(nil, MajorTag, 98), []byte{0xd8, 98}; !bytes.Equal(got, want) {
		t.Errorf("tag 98: %x, want %x", got, want)
	}
}
