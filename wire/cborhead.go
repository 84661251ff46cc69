package wire

import (
	"fmt"

	"github.com/stewardrt/steward/internal/cborhead"
)

// The COSE structures are fixed arrays of byte strings, so they are built and
// parsed by hand with the few helpers below instead of through reflection:
// it is faster, and the parser accepts exactly one spelling of each item.

// CBOR major types, named here for the code that reads and writes COSE
// structures; internal/cborhead owns them and the head encoder.
const (
	majorUint  = cborhead.MajorUint
	majorNeg   = cborhead.MajorNeg
	majorBytes = cborhead.MajorBytes
	majorText  = cborhead.MajorText
	majorArray = cborhead.MajorArray
	majorMap   = cborhead.MajorMap
	majorTag   = cborhead.MajorTag
)

// appendBytes appends a definite-length byte string.
func appendBytes(b, s []byte) []byte {
	return append(cborhead.Append(b, majorBytes, uint64(len(s))), s...)
}

// appendText appends a definite-length text string.
func appendText(b []byte, s string) []byte {
	return append(cborhead.Append(b, majorText, uint64(len(s))), s...)
}

// cborReader reads heads and byte strings from a complete item, refusing
// anything but shortest-form definite heads.
type cborReader struct {
	b   []byte
	off int
}

// head reads one head and returns its major type and argument.
func (r *cborReader) head() (major byte, arg uint64, err error) {
	if r.off >= len(r.b) {
		return 0, 0, fmt.Errorf("%w: truncated CBOR at byte %d", ErrMalformed, r.off)
	}
	ib := r.b[r.off]
	major, ai := ib>>5, ib&0x1f
	r.off++
	var n int
	switch {
	case ai < 24:
		return major, uint64(ai), nil
	case ai == 24:
		n = 1
	case ai == 25:
		n = 2
	case ai == 26:
		n = 4
	case ai == 27:
		n = 8
	default:
		return 0, 0, fmt.Errorf("%w: indefinite or reserved CBOR head 0x%02x at byte %d", ErrMalformed, ib, r.off-1)
	}
	if len(r.b)-r.off < n {
		return 0, 0, fmt.Errorf("%w: truncated CBOR head at byte %d", ErrMalformed, r.off-1)
	}
	for _, c := range r.b[r.off : r.off+n] {
		arg = arg<<8 | uint64(c)
	}
	r.off += n
	if major != 7 && cborhead.Len(arg) != 1+n {
		return 0, 0, fmt.Errorf("%w: CBOR head not in shortest form at byte %d", ErrMalformed, r.off-1-n)
	}
	return major, arg, nil
}

// expect reads a head and requires its major type and argument.
func (r *cborReader) expect(major byte, arg uint64, what string) error {
	m, a, err := r.head()
	if err != nil {
		return err
	}
	if m != major || a != arg {
		return fmt.Errorf("%w: %s: want CBOR major %d argument %d, got major %d argument %d", ErrMalformed, what, major, arg, m, a)
	}
	return nil
}

// bytes reads a definite byte string and returns it as a subslice.
func (r *cborReader) bytes(what string) ([]byte, error) {
	m, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if m != majorBytes {
		return nil, fmt.Errorf("%w: %s: want a byte string, got CBOR major %d", ErrMalformed, what, m)
	}
	if n > uint64(len(r.b)-r.off) {
		return nil, fmt.Errorf("%w: %s: byte string of %d bytes overruns the message", ErrMalformed, what, n)
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

// end requires that every byte was consumed.
func (r *cborReader) end() error {
	if r.off != len(r.b) {
		return fmt.Errorf("%w: %d trailing bytes after the COSE message", ErrMalformed, len(r.b)-r.off)
	}
	return nil
}
