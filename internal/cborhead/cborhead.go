// Package cborhead writes RFC 8949 CBOR heads (the initial byte and the
// argument of a data item) in their shortest form. It is the one encoder of
// heads for the code that builds CBOR by hand on hot paths: package wire
// (COSE structures) and package journal (the record envelope). It imports
// nothing of steward's, so both can share it without depending on each other.
//
//	b = cborhead.Append(b, cborhead.MajorArray, 4) // 0x84
//	b = cborhead.Append(b, cborhead.MajorBytes, uint64(len(s)))
//	b = append(b, s...)
package cborhead

import "encoding/binary"

// CBOR major types (RFC 8949 section 3.1).
const (
	MajorUint  = 0
	MajorNeg   = 1
	MajorBytes = 2
	MajorText  = 3
	MajorArray = 4
	MajorMap   = 5
	MajorTag   = 6
)

// Append appends the head of major type major with argument n in its
// shortest form (the only form deterministic encoding allows). major must
// be 0 to 7; n is the value, length or count the major type says.
func Append(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, m|27), n)
	}
}

// Len is the length of the shortest head with argument n: what Append
// adds for it.
func Len(n uint64) int {
	switch {
	case n < 24:
		return 1
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	case n <= 0xffffffff:
		return 5
	default:
		return 9
	}
}

// Int returns the major type and argument of the integer v: MajorUint and
// v when v >= 0, else MajorNeg and -1-v.
func Int(v int64) (major byte, n uint64) {
	if v < 0 {
		return MajorNeg, ^uint64(v) // -1-v, without overflow at math.MinInt64
	}
	return MajorUint, uint64(v)
}
