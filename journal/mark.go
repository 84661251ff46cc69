package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
)

// Place is where one record's frame is in the log: its sequence number,
// the segment that holds it (named by the segment's first sequence
// number) and the frame's byte offset in that segment. An owner keeps a
// record's place in an index of its own, to read the record again at once
// (ReadAt) instead of iterating to it.
type Place struct {
	Seq     uint64 `cbor:"seq"`
	Segment uint64 `cbor:"segment"`
	Offset  int64  `cbor:"offset"`
}

// Mark is a point of the log and what the log was up to it: the last
// record it covers, where the next frame goes, the chain head and the
// binding in force there. Open goes on from a mark without reading
// anything before it (Options.From), so an owner keeps the mark of the
// last record its snapshot of derived state reflects, and starts from the
// snapshot and the records after the mark.
type Mark struct {
	// Seq is the last record the mark covers; Head is the SHA-256 of its
	// payload, which the next record's prev must equal.
	Seq  uint64 `cbor:"seq"`
	Head []byte `cbor:"head"`
	// Segment (its first sequence number) and End (the offset just past
	// record Seq's frame) say where the next frame goes: at End of that
	// segment, or at 0 of the next one when it does not fit there.
	Segment uint64 `cbor:"segment"`
	End     int64  `cbor:"end"`
	// The binding in force at Seq (the bind record and the rebinds up to
	// it), and the segment size the log was made with.
	Owner       string `cbor:"owner"`
	Format      string `cbor:"format"`
	Config      []byte `cbor:"config"`
	Binding     []byte `cbor:"binding"`
	Rebinds     int    `cbor:"rebinds"`
	SegmentSize int64  `cbor:"segmentSize"`
}

// Mark returns the mark of the last durable record: everything Open needs
// to go on from it (Options.From). A journal open read-write always has one
// (the bind record's at least); a read-only one of an empty log returns
// the zero Mark, which no Open accepts.
func (j *Journal) Mark() Mark {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.markLocked()
}

// markLocked is Mark with mu held (or before Open returns).
func (j *Journal) markLocked() Mark {
	if j.lastSeq == 0 {
		return Mark{}
	}
	var seg segment
	for i := len(j.segs) - 1; i >= 0; i-- {
		if j.segs[i].records > 0 {
			seg = j.segs[i]
			break
		}
	}
	return Mark{
		Seq: j.lastSeq, Head: bytes.Clone(j.head[:]), Segment: seg.first, End: seg.end,
		Owner: j.owner, Format: j.format, Config: bytes.Clone(j.config), Binding: bytes.Clone(j.binding[:]),
		Rebinds: j.rebinds, SegmentSize: j.segmentSize,
	}
}

// watermark is the durable end the mark names.
func (m Mark) watermark() watermark { return watermark{Seq: m.Seq, Segment: m.Segment, End: m.End} }

// minFrame is the smallest frame a record can have: a one-byte kind and
// body, seq 1, at 0.
var minFrame = int64(headerSize + payloadSize(1, "a", 0, 1))

// inconsistency says how m's own fields disagree, or "".
func (m *Mark) inconsistency() string {
	switch {
	case m.Seq == 0:
		return "seq 0 is no record"
	case len(m.Head) != hashSize:
		return fmt.Sprintf("its head is %d bytes, not %d", len(m.Head), hashSize)
	case m.Segment == 0 || m.Segment > m.Seq:
		return fmt.Sprintf("segment %d cannot hold seq %d", m.Segment, m.Seq)
	case m.End < minFrame || m.End > MaxSegmentSize:
		return fmt.Sprintf("end %d is not %d to %d", m.End, minFrame, MaxSegmentSize)
	case uint64(m.End/minFrame) < m.Seq-m.Segment+1:
		return fmt.Sprintf("end %d cannot hold the %d records of segment %d up to seq %d", m.End, m.Seq-m.Segment+1, m.Segment, m.Seq)
	case m.Owner == "" || m.Format == "":
		return "it names no owner or format"
	case checkConfig(m.Config, m.Binding) != nil:
		return fmt.Sprintf("config and binding disagree: %v", checkConfig(m.Config, m.Binding))
	case m.Rebinds < 0 || uint64(m.Rebinds) >= m.Seq:
		return fmt.Sprintf("rebinds %d is not 0 to seq-1 (%d)", m.Rebinds, m.Seq-1)
	case m.SegmentSize < 1 || m.SegmentSize > MaxSegmentSize:
		return fmt.Sprintf("segment size %d is not 1 to %d", m.SegmentSize, MaxSegmentSize)
	}
	return ""
}

// markWindow is how far before a mark's End its record's frame is looked
// for first; a larger record is looked for once more, up to the largest
// frame.
const markWindow = 64 << 10

// verifyMarkFrame checks that the frame ending at m.End of the segment f
// (named name) is record m.Seq, whose payload hashes to m.Head: then End
// is where a frame ends and the mark is a point of this log. Frames have
// no back links, so it is found by its length field, checksum and hash.
// A bind or rebind record there is checked against the mark's binding.
func verifyMarkFrame(dir string, f *os.File, name string, m *Mark) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("journal: stat %s: %w", f.Name(), err)
	}
	if st.Size() < m.End {
		return markMismatch(dir, m, fmt.Sprintf("segment %s is %d bytes, shorter than the mark's end %d", name, st.Size(), m.End))
	}
	// Every segment is made the segment size, or the size of the one
	// record it holds when that is larger: a mark naming another size
	// would rotate (and preallocate) unlike the log.
	if size := st.Size(); size != m.SegmentSize && !(size > m.SegmentSize && m.Seq == m.Segment && m.End == size) {
		return markMismatch(dir, m, fmt.Sprintf("segment %s is %d bytes, not the mark's segment size %d", name, size, m.SegmentSize))
	}
	for window := min(m.End, markWindow); ; window = min(m.End, headerSize+MaxRecordBytes) {
		buf := make([]byte, window)
		if _, err := f.ReadAt(buf, m.End-window); err != nil {
			return fmt.Errorf("journal: read %s: %w", f.Name(), err)
		}
		at, rec, reason := frameEndingAt(buf, m)
		if reason != "" {
			return markMismatch(dir, m, fmt.Sprintf("segment %s: %s", name, reason))
		}
		if at >= 0 {
			start := m.End - window + int64(at)
			if (start == 0) != (m.Seq == m.Segment) {
				return markMismatch(dir, m, fmt.Sprintf("record %d starts at offset %d of segment %s, which is named for seq %d", m.Seq, start, name, m.Segment))
			}
			return m.checkRecord(dir, &rec)
		}
		if window == min(m.End, headerSize+MaxRecordBytes) {
			return markMismatch(dir, m, fmt.Sprintf("no record with the mark's head ends at offset %d of segment %s", m.End, name))
		}
	}
}

// frameEndingAt finds in buf a frame that ends at buf's end and whose
// payload hashes to m.Head, and returns where it starts and its record;
// -1 when there is none. A reason is returned when that payload is not
// record m.Seq.
func frameEndingAt(buf []byte, m *Mark) (int, Record, string) {
	var scratch []byte
	for p := len(buf) - int(minFrame-headerSize); p >= headerSize; p-- {
		if int(binary.LittleEndian.Uint32(buf[p-headerSize:])) != len(buf)-p {
			continue
		}
		payload := buf[p:]
		if !bytes.HasPrefix(payload, payloadMagic) || crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(buf[p-4:]) {
			continue
		}
		if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], m.Head) {
			continue
		}
		rec, err := decodeRecord(payload, &scratch)
		switch {
		case err != nil:
			return -1, Record{}, fmt.Sprintf("the record with the mark's head does not decode: %v", err)
		case rec.Seq != m.Seq:
			return -1, Record{}, fmt.Sprintf("the record with the mark's head is seq %d", rec.Seq)
		}
		return p - headerSize, rec, ""
	}
	return -1, Record{}, ""
}

// checkRecord checks the mark's binding against its record when that is
// the bind record or a rebind, the records that say what it is.
func (m *Mark) checkRecord(dir string, r *Record) error {
	var reason string
	switch r.Kind {
	case kindBind:
		var b bindBody
		switch err := decMode.Unmarshal(r.Body, &b); {
		case err != nil:
			reason = fmt.Sprintf("its bind record's body: %v", err)
		case b.Owner != m.Owner || b.Format != m.Format:
			reason = fmt.Sprintf("its bind record names owner %q and format %q", b.Owner, b.Format)
		case !bytes.Equal(b.Config, m.Config):
			reason = "its bind record binds another config"
		case b.SegmentSize != nil && int64(*b.SegmentSize) != m.SegmentSize:
			reason = fmt.Sprintf("its bind record records segment size %d", *b.SegmentSize)
		}
	case kindRebind:
		var b rebindBody
		switch err := decMode.Unmarshal(r.Body, &b); {
		case err != nil:
			reason = fmt.Sprintf("its rebind record's body: %v", err)
		case !bytes.Equal(b.After, m.Config):
			reason = "its rebind record binds another config"
		case m.Rebinds == 0:
			reason = "it counts no rebind but its record is one"
		}
	}
	if reason != "" {
		return markMismatch(dir, m, reason)
	}
	return nil
}
