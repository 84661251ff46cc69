package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The watermark is how a read-only Open reads a live journal: the owner
// rewrites it in place after every fdatasync of a batch, before any append
// of the batch is answered, so it never names less than what was
// acknowledged and never more than what is durable. It is not fsync'd: it
// is read only while the owner runs (holds the lock), and a crash leaves it
// at most behind the log, never ahead (it is written after the data it
// names is durable).
//
//	0  4  magic "jwm1"
//	4  8  seq      (u64le) the last durable record, 0 for none
//	12 8  segment  (u64le) first seq of the segment that holds it
//	20 8  end      (u64le) offset just past its frame
//	28 4  CRC-32C  (u32le) of bytes 0 to 28
const (
	watermarkName = "durable"
	watermarkSize = 32
	// watermarkReads bounds how often a reader rereads a watermark whose
	// checksum fails: a read that overlaps the owner's rewrite of the 32
	// bytes can see half of each, and the next one does not.
	watermarkReads = 8
)

var watermarkMagic = [4]byte{'j', 'w', 'm', '1'}

// watermark is the durable end of a live log: record Seq ends at End of
// segment Segment.
type watermark struct {
	Seq     uint64
	Segment uint64
	End     int64
}

func (w watermark) encode() [watermarkSize]byte {
	var b [watermarkSize]byte
	w.encodeTo(&b)
	return b
}

// encodeTo encodes w into b (which the owner keeps, so that rewriting the
// watermark allocates nothing).
func (w watermark) encodeTo(b *[watermarkSize]byte) {
	copy(b[0:4], watermarkMagic[:])
	binary.LittleEndian.PutUint64(b[4:12], w.Seq)
	binary.LittleEndian.PutUint64(b[12:20], w.Segment)
	binary.LittleEndian.PutUint64(b[20:28], uint64(w.End))
	binary.LittleEndian.PutUint32(b[28:32], crc32.Checksum(b[:28], castagnoli))
}

// decodeWatermark returns the watermark in b, or false when b is not one:
// wrong size, magic or checksum, or fields no log can have.
func decodeWatermark(b []byte) (watermark, bool) {
	if len(b) != watermarkSize || [4]byte(b[0:4]) != watermarkMagic ||
		crc32.Checksum(b[:28], castagnoli) != binary.LittleEndian.Uint32(b[28:32]) {
		return watermark{}, false
	}
	w := watermark{
		Seq:     binary.LittleEndian.Uint64(b[4:12]),
		Segment: binary.LittleEndian.Uint64(b[12:20]),
		End:     int64(binary.LittleEndian.Uint64(b[20:28])),
	}
	empty := w.Seq == 0 && w.Segment == 0 && w.End == 0
	if !empty && (w.Segment == 0 || w.Segment > w.Seq || w.End <= headerSize) {
		return watermark{}, false
	}
	return w, true
}

// watermarkFile is the owner's open watermark file. Its zero value (no
// file) writes nothing.
type watermarkFile struct {
	f      *os.File
	warned bool // a failed write was logged; later ones are not
	buf    [watermarkSize]byte
}

// open creates (or opens) the watermark file in dir and writes w to it.
// A failure is logged, not returned: the watermark only spares readers of
// a live log, who without one read it leniently, and a journal on a full
// disk must still open.
func (wf *watermarkFile) open(dir string, w watermark, log *slog.Logger) {
	path := filepath.Join(dir, watermarkName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		log.Warn("journal: cannot create the watermark file; read-only opens of the live journal will read it without one",
			"file", path, "err", err)
		return
	}
	wf.f = f
	wf.write(w, log)
}

// write rewrites the watermark in place: one pwrite, no fsync.
func (wf *watermarkFile) write(w watermark, log *slog.Logger) {
	if wf.f == nil || watermarkOff {
		return
	}
	w.encodeTo(&wf.buf)
	_, err := unix.Pwrite(int(wf.f.Fd()), wf.buf[:], 0)
	if err != nil && !wf.warned {
		wf.warned = true
		log.Warn("journal: cannot write the watermark file; read-only opens of the live journal read less than is durable",
			"file", wf.f.Name(), "err", err)
	}
}

func (wf *watermarkFile) close() error {
	if wf.f == nil {
		return nil
	}
	err := wf.f.Close()
	wf.f = nil
	return err
}

// readWatermark reads dir's watermark. false: there is none that
// decodes.
func readWatermark(dir string) (watermark, bool) {
	f, err := os.OpenFile(filepath.Join(dir, watermarkName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return watermark{}, false
	}
	defer f.Close()
	return decodeRereading(func(b []byte) (int, error) { return unix.Pread(int(f.Fd()), b, 0) })
}

// decodeRereading reads a watermark with read, again while its checksum
// fails, up to watermarkReads times.
func decodeRereading(read func([]byte) (int, error)) (watermark, bool) {
	var b [watermarkSize + 1]byte
	for range watermarkReads {
		n, err := read(b[:])
		if err != nil {
			return watermark{}, false
		}
		if w, ok := decodeWatermark(b[:n]); ok {
			return w, true
		}
	}
	return watermark{}, false
}

// ownerRunning reports whether an owner holds dir's lock now. It takes a
// shared lock for the time of two system calls and never holds it
// longer; an owner that starts meanwhile waits for it (takeLock).
func ownerRunning(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false // no lock file: no owner ever opened it
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// lockTries bounds how often takeLock tries while the lock is held only
// shared, by readers probing it; lockBackoff is the pause between tries,
// so that a reader descheduled while it holds its probe is waited for up
// to about lockTries*lockBackoff (a fifth of a second).
const (
	lockTries   = 200
	lockBackoff = time.Millisecond
)

// errHeldShared is the lock held shared through lockTries tries.
var errHeldShared = fmt.Errorf("held shared through %d tries: %w", lockTries, unix.EWOULDBLOCK)

// flockOwner takes the exclusive lock on fd. A reader's probe holds a
// shared lock for a moment (ownerRunning); an owner starting then must not
// fail, so while the lock can be had shared (no owner holds it), it tries
// again. It returns unix.EWOULDBLOCK when an owner holds it.
func flockOwner(fd int) error {
	for try := 1; ; try++ {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		if unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) != nil {
			return unix.EWOULDBLOCK // exclusive: another owner
		}
		unix.Flock(fd, unix.LOCK_UN)
		if try == lockTries {
			return errHeldShared
		}
		if lockRetryHook != nil {
			lockRetryHook(try)
		}
		time.Sleep(lockBackoff)
	}
}
