package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/internal/cborhead"
)

// Record is one entry of the log, as it is stored (the payload of a frame)
// and as Iterate, Options.OnRecord and ReadAt hand it out.
type Record struct {
	Seq  uint64          `cbor:"seq"`
	Prev []byte          `cbor:"prev"` // SHA-256 of the previous record's payload (32 zero bytes for the first)
	Kind string          `cbor:"kind"`
	At   int64           `cbor:"at"` // unix ms
	Body cbor.RawMessage `cbor:"body"`
	// Place is where the record's frame is in the log, filled by Iterate,
	// OnRecord and ReadAt. It is not part of the payload.
	Place Place `cbor:"-"`
}

const (
	// MaxRecordBytes bounds the payload of one record (the deterministic CBOR
	// of Record). A frame is 8 header bytes more.
	MaxRecordBytes = 4 << 20

	// MaxKindBytes bounds a record kind. A kind is 1 to MaxKindBytes
	// characters of A-Z a-z 0-9 . _ : / -.
	MaxKindBytes = 64

	// MaxNestedLevels, MaxArrayElements and MaxMapPairs are the strict
	// decoding limits of a payload. The record envelope is one level, so a
	// body may nest MaxNestedLevels-1 levels.
	MaxNestedLevels  = 16
	MaxArrayElements = 4096
	MaxMapPairs      = 4096

	headerSize = 8 // u32 length | u32 CRC-32C, little-endian
	hashSize   = 32
)

// payloadMagic is how every payload starts: a map of five pairs whose first
// key, in core deterministic order, is "at". The tail analysis uses it to
// find records that follow a damaged one.
var payloadMagic = []byte{0xa5, 0x62, 'a', 't'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// encMode is RFC 8949 core deterministic encoding.
	encMode cbor.EncMode
	// decMode decodes payloads strictly: no duplicate keys, no unknown
	// fields, no indefinite lengths, bounded nesting and sizes.
	decMode cbor.DecMode
	// bodyMode checks a body before it is wrapped in the envelope, with one
	// nesting level fewer so that the whole payload passes decMode.
	bodyMode cbor.DecMode
	// rawMode re-encodes a decoded body to hold it to what the encoder
	// accepts (well-formed, and built-in tags with the right content), so
	// that Open accepts no body that Append could not have written.
	rawMode cbor.UserBufferEncMode
	rawBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	strict := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   MaxNestedLevels,
		MaxArrayElements:  MaxArrayElements,
		MaxMapPairs:       MaxMapPairs,
		IndefLength:       cbor.IndefLengthForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}
	if decMode, err = strict.DecMode(); err != nil {
		panic(err)
	}
	strict.MaxNestedLevels = MaxNestedLevels - 1
	if bodyMode, err = strict.DecMode(); err != nil {
		panic(err)
	}
	if rawMode, err = cbor.CoreDetEncOptions().UserBufferEncMode(); err != nil {
		panic(err)
	}
}

// checkBody reports whether the encoder accepts body as a raw message.
func checkBody(body cbor.RawMessage) error {
	b := rawBufs.Get().(*bytes.Buffer)
	b.Reset()
	err := rawMode.MarshalToBuffer(body, b)
	if b.Cap() <= 64<<10 {
		rawBufs.Put(b)
	}
	return err
}

// validKind reports whether k is 1 to MaxKindBytes of A-Za-z0-9._:/-.
func validKind(k string) bool {
	if len(k) == 0 || len(k) > MaxKindBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '/', c == '-':
		default:
			return false
		}
	}
	return true
}

// payloadSize is the exact length appendPayload produces.
func payloadSize(seq uint64, kind string, at int64, bodyLen int) int {
	_, an := cborhead.Int(at)
	return 1 +
		3 + cborhead.Len(an) +
		4 + cborhead.Len(seq) +
		5 + bodyLen +
		5 + cborhead.Len(uint64(len(kind))) + len(kind) +
		5 + 2 + hashSize
}

// appendPayload appends the deterministic CBOR of a Record. It is written by
// hand because it is on the path of every append and its shape never
// changes; TestPayloadMatchesLibrary holds it to the library's core
// deterministic encoding. Keys are in core deterministic order: at, seq,
// body, kind, prev. body must be one well-formed CBOR data item.
func appendPayload(dst []byte, seq uint64, prev *[hashSize]byte, kind string, at int64, body []byte) []byte {
	dst = append(dst, 0xa5)
	dst = append(dst, 0x62, 'a', 't')
	major, an := cborhead.Int(at)
	dst = cborhead.Append(dst, major, an)
	dst = append(dst, 0x63, 's', 'e', 'q')
	dst = cborhead.Append(dst, cborhead.MajorUint, seq)
	dst = append(dst, 0x64, 'b', 'o', 'd', 'y')
	dst = append(dst, body...)
	dst = append(dst, 0x64, 'k', 'i', 'n', 'd')
	dst = cborhead.Append(dst, cborhead.MajorText, uint64(len(kind)))
	dst = append(dst, kind...)
	dst = append(dst, 0x64, 'p', 'r', 'e', 'v')
	dst = append(dst, 0x58, hashSize)
	return append(dst, prev[:]...)
}

// decodeRecord decodes a payload strictly: it must be the core deterministic
// encoding of a Record with all five fields, a 32-byte prev, a seq of at
// least 1 and a valid kind. scratch is reused for the re-encoding check.
func decodeRecord(payload []byte, scratch *[]byte) (Record, error) {
	var r Record
	if err := decMode.Unmarshal(payload, &r); err != nil {
		return Record{}, fmt.Errorf("undecodable payload: %v", err)
	}
	if len(r.Prev) != hashSize {
		return Record{}, fmt.Errorf("prev is %d bytes, want %d", len(r.Prev), hashSize)
	}
	if r.Seq == 0 {
		return Record{}, fmt.Errorf("seq 0")
	}
	if !validKind(r.Kind) {
		return Record{}, fmt.Errorf("invalid kind %q", r.Kind)
	}
	if len(r.Body) == 0 {
		return Record{}, fmt.Errorf("no body")
	}
	if err := checkBody(r.Body); err != nil {
		return Record{}, fmt.Errorf("invalid body: %v", err)
	}
	var prev [hashSize]byte
	copy(prev[:], r.Prev)
	*scratch = appendPayload((*scratch)[:0], r.Seq, &prev, r.Kind, r.At, r.Body)
	if !bytes.Equal(*scratch, payload) {
		return Record{}, fmt.Errorf("payload is not in core deterministic encoding or has missing fields")
	}
	return r, nil
}

// putHeader fills the 8-byte frame header for payload.
func putHeader(h []byte, payload []byte) {
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(payload, castagnoli))
}

// decodeFrame reads one frame from the start of b: header, bounds, checksum
// and payload. It returns the record, the payload and the frame length.
func decodeFrame(b []byte, scratch *[]byte) (Record, []byte, int, error) {
	if len(b) < headerSize {
		return Record{}, nil, 0, fmt.Errorf("incomplete header (%d bytes)", len(b))
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	sum := binary.LittleEndian.Uint32(b[4:8])
	if n == 0 {
		return Record{}, nil, 0, fmt.Errorf("zero length")
	}
	if n > MaxRecordBytes {
		return Record{}, nil, 0, fmt.Errorf("length %d exceeds MaxRecordBytes (%d)", n, MaxRecordBytes)
	}
	if int64(n) > int64(len(b)-headerSize) {
		return Record{}, nil, 0, fmt.Errorf("record of %d bytes is incomplete (%d present)", n, len(b)-headerSize)
	}
	payload := b[headerSize : headerSize+int(n)]
	if got := crc32.Checksum(payload, castagnoli); got != sum {
		return Record{}, nil, 0, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", sum, got)
	}
	r, err := decodeRecord(payload, scratch)
	if err != nil {
		return Record{}, nil, 0, err
	}
	return r, payload, headerSize + int(n), nil
}
