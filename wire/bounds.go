package wire

import (
	"errors"
	"fmt"
)

// The wire bounds. This file is the one place that owns them; every other
// package that needs one of these numbers imports it from here.
const (
	// MaxRequestFrame bounds a request frame: the bytes of the COSE message
	// after the 4-byte length prefix, on forward, reverse and foreground sockets.
	MaxRequestFrame = 262144
	// MaxReplyFrame bounds a reply frame, after the 4-byte length prefix.
	MaxReplyFrame = 1048576
	// MaxNesting bounds CBOR nesting in any decoded item, counted from the
	// outermost item as level 1: each array or map is a level, and so is each
	// tag that directly encloses another tag.
	MaxNesting = 16
	// MaxEntries bounds the entries of one CBOR array or the pairs of one CBOR map.
	MaxEntries = 4096
)

// ErrFrameTooLarge is wrapped by every refusal of a frame past its bound,
// on write (nothing written) and on read (refused on the length prefix,
// before the body is allocated or read).
var ErrFrameTooLarge = errors.New("wire: frame too large")

// FrameTooLargeError says which frame was refused and which bound it crossed.
// errors.Is(err, ErrFrameTooLarge) holds for it.
type FrameTooLargeError struct {
	Size  uint64 // bytes of the COSE message, after the prefix
	Limit int    // the bound it exceeds
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame of %d bytes exceeds the %s of %d bytes", e.Size, boundName(e.Limit), e.Limit)
}

// Unwrap makes errors.Is(err, ErrFrameTooLarge) true.
func (e *FrameTooLargeError) Unwrap() error { return ErrFrameTooLarge }

// boundName names a frame limit in error messages so that an operator can
// tell which table entry of the design was hit.
func boundName(limit int) string {
	switch limit {
	case MaxRequestFrame:
		return "request frame bound"
	case MaxReplyFrame:
		return "reply frame bound"
	default:
		return "frame bound"
	}
}
