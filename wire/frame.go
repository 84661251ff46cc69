package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// WriteFrame writes msg with its 4-byte big-endian length prefix in one Write.
// A msg longer than limit is refused before anything is written.
func WriteFrame(w io.Writer, msg []byte, limit int) error {
	if len(msg) > limit {
		return &FrameTooLargeError{Size: uint64(len(msg)), Limit: limit}
	}
	buf := make([]byte, 4+len(msg))
	binary.BigEndian.PutUint32(buf, uint32(len(msg)))
	copy(buf[4:], msg)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("wire: write frame of %d bytes: %w", len(msg), err)
	}
	return nil
}

// ReadFrame reads one frame: the 4-byte big-endian prefix, then the message.
// A prefix declaring more than limit bytes is refused before the body is
// allocated or read. A clean end of stream before the prefix returns io.EOF
// itself; an end of stream inside a frame returns an error wrapping
// io.ErrUnexpectedEOF. Pass a buffered reader: ReadFrame makes two reads.
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("wire: read frame prefix: %w", err)
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if uint64(n) > uint64(max(limit, 0)) {
		return nil, &FrameTooLargeError{Size: uint64(n), Limit: limit}
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("wire: read frame body of %d bytes: %w", n, err)
	}
	return msg, nil
}
