package journal

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
