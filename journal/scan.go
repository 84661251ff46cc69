package journal

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// tornTail is a damaged last record with nothing valid after it: bytes from
// offset to end (the end of non-zero data) that Open moves aside.
type tornTail struct {
	segment string // file name
	offset  int64
	end     int64
	reason  string
	data    []byte // the bytes [offset, end)
}

// scanMode says how a scan judges a bad frame.
type scanMode int

const (
	// scanInner: not the last segment, or the part of the last one a
	// watermark says is durable. A bad frame is corruption.
	scanInner scanMode = iota
	// scanTail: the last segment. A bad frame is a torn tail unless a
	// valid frame follows it.
	scanTail
	// scanLenient: the last segment of a live log read without a usable
	// watermark. A bad frame ends the read, judged nothing: it may be the
	// batch the owner is writing.
	scanLenient
)

// scanner verifies one segment file record by record.
type scanner struct {
	dir     string
	f       *os.File
	seg     *segment
	ch      *chain
	mode    scanMode
	from    int64 // where the scan starts: 0, or the End of the mark it goes on from
	size    int64 // where it stops: the file size, or a watermark's End
	hand    func(*Record) error
	payload []byte
	scratch []byte
}

func (s *scanner) corrupt(off int64, format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	if s.ch.atMark != nil {
		// Nothing after the mark was verified yet: the mark, not the
		// log, is what fails to match here.
		return markMismatch(s.dir, s.ch.atMark, fmt.Sprintf("%s at offset %d: %s", s.seg.name, off, reason))
	}
	return &CorruptError{Segment: filepath.Join(s.dir, s.seg.name), Offset: off, Reason: reason}
}

// handError carries an error of Options.OnRecord out of a load, to be
// returned as is.
type handError struct{ err error }

func (e *handError) Error() string { return e.err.Error() }

// scan reads s.seg from s.from to its end (or to limit, when limit >= 0),
// verifying every frame (length, CRC-32C, strict decoding), the sequence
// and hash chain and the meaning of bind and rebind records, then (up to
// the file's end) that only zeros follow the last record. It fills seg's
// counts and hands each verified record to s.hand. A bad frame is judged
// as s.mode says.
func (s *scanner) scan(limit int64) (*tornTail, error) {
	st, err := s.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("journal: stat %s: %w", s.f.Name(), err)
	}
	s.seg.size = st.Size()
	s.size = s.seg.size
	if limit >= 0 {
		s.size = min(limit, s.size)
	}
	if s.from == 0 && s.seg.first != s.ch.next {
		return nil, s.corrupt(0, "segment is named for seq %d but the log continues at seq %d", s.seg.first, s.ch.next)
	}
	return s.run()
}

func (s *scanner) run() (*tornTail, error) {
	size := s.size
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, s.from, size-s.from), int(min(size-s.from+1, 256<<10)))
	var hdr [headerSize]byte
	off := s.from
	for {
		rem := size - off
		if rem == 0 {
			break
		}
		if rem < headerSize {
			if _, err := io.ReadFull(r, hdr[:rem]); err != nil {
				return s.readFailed(err)
			}
			if !allZero(hdr[:rem]) {
				return s.bad(off, "incomplete header at the end of the segment")
			}
			break
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return s.readFailed(err)
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if n == 0 {
			if sum != 0 {
				return s.bad(off, "zero length with a non-zero checksum")
			}
			nz, err := firstNonZero(r, off+headerSize)
			if err != nil {
				return s.readFailed(err)
			}
			if nz >= 0 {
				return s.bad(off, fmt.Sprintf("the log ends here but byte %d is not zero", nz))
			}
			break
		}
		if n > MaxRecordBytes {
			return s.bad(off, fmt.Sprintf("length %d exceeds MaxRecordBytes (%d)", n, MaxRecordBytes))
		}
		if int64(n) > rem-headerSize {
			return s.bad(off, fmt.Sprintf("record of %d bytes runs past the end of the segment", n))
		}
		if cap(s.payload) < int(n) {
			s.payload = make([]byte, n)
		}
		payload := s.payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return s.readFailed(err)
		}
		if got := crc32.Checksum(payload, castagnoli); got != sum {
			return s.bad(off, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", sum, got))
		}
		rec, err := decodeRecord(payload, &s.scratch)
		if err != nil {
			return s.bad(off, err.Error())
		}
		if err := s.verify(off, &rec, payload); err != nil {
			return nil, err
		}
		off += headerSize + int64(n)
		s.seg.end = off
	}
	return nil, nil
}

// verify checks a decoded record at off against the chain, applies it and
// hands it on.
func (s *scanner) verify(off int64, rec *Record, payload []byte) error {
	if rec.Seq != s.ch.next {
		return s.corrupt(off, "record has seq %d, want %d", rec.Seq, s.ch.next)
	}
	if !bytes.Equal(rec.Prev, s.ch.prev[:]) {
		return s.corrupt(off, "record %d: prev %x is not the hash of record %d", rec.Seq, rec.Prev, rec.Seq-1)
	}
	if err := s.ch.apply(rec); err != nil {
		if s.ch.markConfig != nil && rec.Kind == kindRebind {
			// The config in force is still the mark's.
			return markMismatch(s.dir, s.ch.markConfig, fmt.Sprintf("record %d: %v", rec.Seq, err))
		}
		return s.corrupt(off, "record %d: %v", rec.Seq, err)
	}
	s.ch.atMark = nil
	s.ch.prev = sha256.Sum256(payload)
	s.ch.next++
	s.seg.records++
	s.seg.last = rec.Seq
	if s.hand != nil {
		rec.Place = Place{Seq: rec.Seq, Segment: s.seg.first, Offset: off}
		if err := s.hand(rec); err != nil {
			return err
		}
	}
	return nil
}

// readFailed handles a failed read in run. Read leniently, a segment
// that ends early was cut short under the read (its owner removed a failed
// write): the read ends there.
func (s *scanner) readFailed(err error) (*tornTail, error) {
	if s.mode == scanLenient && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return nil, nil
	}
	return nil, s.ioErr(err)
}

func (s *scanner) ioErr(err error) error {
	return fmt.Errorf("journal: read %s: %w", filepath.Join(s.dir, s.seg.name), err)
}

// bad handles a frame at off that is incomplete, fails its checksum or does
// not decode. Outside the last segment that is corruption. In the last
// segment it is a torn tail unless a valid frame follows it; read
// leniently, it is where the read ends.
func (s *scanner) bad(off int64, reason string) (*tornTail, error) {
	switch s.mode {
	case scanLenient:
		return nil, nil
	case scanInner:
		return nil, s.corrupt(off, "%s (not the last segment)", reason)
	}
	return s.analyzeTail(off, reason)
}

// tailSlack is how far past the last non-zero byte a following record is
// looked for: a valid record ends in its 32-byte prev hash, which is zero
// only for record 1.
const tailSlack = headerSize + hashSize

// analyzeTail decides between a torn tail and corruption for a bad frame at
// x in the last segment. It finds the end E of non-zero data and looks for a
// valid frame (payload magic, bounded length, matching CRC-32C) starting
// anywhere in (x, E). If there is one, acknowledged-looking records follow
// the damage and the log is corrupt; otherwise the bytes [x, E) are a torn
// tail.
func (s *scanner) analyzeTail(x int64, reason string) (*tornTail, error) {
	end, err := lastNonZero(s.f, x, s.seg.size)
	if err != nil {
		return nil, s.ioErr(err)
	}
	if end <= x {
		// Only reachable if the file changed under us; nothing is torn.
		return nil, s.corrupt(x, "%s, but the bytes are zero on a second read", reason)
	}
	hi := min(s.seg.size, end+tailSlack)
	buf := make([]byte, hi-x)
	if _, err := s.f.ReadAt(buf, x); err != nil {
		return nil, s.ioErr(err)
	}
	if y, ok := findFrame(buf, 1); ok {
		return nil, s.corrupt(x, "%s, and a valid record follows at offset %d", reason, x+int64(y))
	}
	return &tornTail{segment: s.seg.name, offset: x, end: end, reason: reason, data: buf[:end-x]}, nil
}

// findFrame returns the first offset y >= from in buf where a frame with the
// payload magic, a length within bounds and a matching CRC-32C starts.
func findFrame(buf []byte, from int) (int, bool) {
	for y := from; y+headerSize+len(payloadMagic) <= len(buf); y++ {
		i := bytes.Index(buf[y+headerSize:], payloadMagic)
		if i < 0 {
			return 0, false
		}
		y += i
		n := int64(binary.LittleEndian.Uint32(buf[y:]))
		if n < int64(len(payloadMagic)) || n > MaxRecordBytes || int64(y)+headerSize+n > int64(len(buf)) {
			continue
		}
		payload := buf[y+headerSize : int64(y)+headerSize+n]
		if crc32.Checksum(payload, castagnoli) == binary.LittleEndian.Uint32(buf[y+4:]) {
			return y, true
		}
	}
	return 0, false
}

func allZero(b []byte) bool { return firstNonZeroIn(b) < 0 }

// zeroBlock is what a preallocated, never-written block holds.
var zeroBlock [4096]byte

// firstNonZeroIn returns the index of the first non-zero byte of b, or -1.
// Whole blocks are compared with bytes.Equal, which the runtime vectorises,
// so scanning the zero-filled end of a 64 MiB segment at open costs memory
// bandwidth, not a loop per byte; only a block holding a non-zero byte is
// walked byte by byte.
func firstNonZeroIn(b []byte) int {
	for i := 0; i < len(b); i += len(zeroBlock) {
		blk := b[i:min(i+len(zeroBlock), len(b))]
		if bytes.Equal(blk, zeroBlock[:len(blk)]) {
			continue
		}
		for j, c := range blk {
			if c != 0 {
				return i + j
			}
		}
	}
	return -1
}

// lastNonZeroIn returns the index of the last non-zero byte of b, or -1.
func lastNonZeroIn(b []byte) int {
	for end := len(b); end > 0; end -= len(zeroBlock) {
		start := max(0, end-len(zeroBlock))
		blk := b[start:end]
		if bytes.Equal(blk, zeroBlock[:len(blk)]) {
			continue
		}
		for j := len(blk) - 1; j >= 0; j-- {
			if blk[j] != 0 {
				return start + j
			}
		}
	}
	return -1
}

// firstNonZero reads r to its end and returns the offset of its first
// non-zero byte (r starts at base), or -1.
func firstNonZero(r *bufio.Reader, base int64) (int64, error) {
	buf := make([]byte, min(64<<10, r.Size()))
	off := base
	for {
		n, err := r.Read(buf)
		if i := firstNonZeroIn(buf[:n]); i >= 0 {
			return off + int64(i), nil
		}
		off += int64(n)
		if err == io.EOF {
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// lastNonZero returns the offset just past the last non-zero byte of f in
// [lo, hi), or lo if all are zero. It reads backwards in chunks, since the
// damage is normally near the start of a mostly zero preallocation.
func lastNonZero(f *os.File, lo, hi int64) (int64, error) {
	const chunk = 1 << 20
	buf := make([]byte, min(chunk, hi-lo))
	for hi > lo {
		n := min(int64(chunk), hi-lo)
		b := buf[:n]
		if _, err := f.ReadAt(b, hi-n); err != nil {
			return 0, err
		}
		if i := lastNonZeroIn(b); i >= 0 {
			return hi - n + int64(i) + 1, nil
		}
		hi -= n
	}
	return lo, nil
}
