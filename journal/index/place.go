package index

import (
	"encoding/binary"
	"fmt"

	"github.com/stewardrt/steward/journal"
)

// PlaceBytes is the length of an encoded journal.Place: a version byte
// (placeVersion) and Seq, Segment and Offset as big-endian 64-bit
// integers. A fixed binary form and not CBOR: an index holds millions of
// them, each read with no decoder, and the index can be rebuilt from the
// journal if the form ever changes (the version byte says it did).
const PlaceBytes = 1 + 3*8

const placeVersion = 1

// EncodePlace returns p's PlaceBytes bytes.
func EncodePlace(p journal.Place) []byte {
	b := make([]byte, PlaceBytes)
	b[0] = placeVersion
	binary.BigEndian.PutUint64(b[1:], p.Seq)
	binary.BigEndian.PutUint64(b[9:], p.Segment)
	binary.BigEndian.PutUint64(b[17:], uint64(p.Offset))
	return b
}

// DecodePlace decodes what EncodePlace returned, refusing any other
// length or version, a sequence number of 0, a segment after the seq
// (a segment is named by its first record) and a negative offset.
func DecodePlace(b []byte) (journal.Place, error) {
	if len(b) != PlaceBytes {
		return journal.Place{}, fmt.Errorf("index: a place is %d bytes; got %d", PlaceBytes, len(b))
	}
	if b[0] != placeVersion {
		return journal.Place{}, fmt.Errorf("index: a place of version %d; this index reads version %d", b[0], placeVersion)
	}
	p := journal.Place{
		Seq:     binary.BigEndian.Uint64(b[1:]),
		Segment: binary.BigEndian.Uint64(b[9:]),
		Offset:  int64(binary.BigEndian.Uint64(b[17:])),
	}
	if p.Seq == 0 || p.Segment == 0 || p.Segment > p.Seq || p.Offset < 0 {
		return journal.Place{}, fmt.Errorf("index: place %+v is no record's place", p)
	}
	return p, nil
}

// PutPlace puts the encoded place p under key.
func (x *Index) PutPlace(bucket string, key []byte, p journal.Place) error {
	return x.Put(bucket, key, EncodePlace(p))
}

// GetPlace returns the place under key; a value that is not a place is
// an error naming the bucket and key.
func (x *Index) GetPlace(bucket string, key []byte) (journal.Place, bool, error) {
	v, ok, err := x.Get(bucket, key)
	if err != nil || !ok {
		return journal.Place{}, ok, err
	}
	p, err := DecodePlace(v)
	if err != nil {
		return journal.Place{}, false, fmt.Errorf("index: %s: bucket %q key %x: %w", x.path, bucket, key, err)
	}
	return p, true, nil
}

// SeqKey is the 8-byte big-endian key of a sequence number: keys in
// sequence order, so that Last gives the latest.
func SeqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// KeySeq decodes a SeqKey.
func KeySeq(key []byte) (uint64, error) {
	if len(key) != 8 {
		return 0, fmt.Errorf("index: a sequence key is 8 bytes; got %d", len(key))
	}
	return binary.BigEndian.Uint64(key), nil
}
