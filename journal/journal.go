package journal

import (
	"log/slog"
	"os"
	"sync"
)

// Options configure Open.
type Options struct {
	// Owner names who owns the log, e.g. "steward-operator". Required to
	// create a journal; on an existing one a non-empty Owner must match the
	// bind record (else ErrBindingMismatch), an empty one is not checked.
	Owner string
	// Format names the record language, e.g. "steward-host-journal-v1".
	// Required and checked like Owner.
	Format string
	// Config is the owner's config, bytes the journal does not interpret.
	// Creating a journal binds SHA-256(Config) ("{}" when nil); opening an
	// existing one refuses with ErrBindingMismatch when that hash differs
	// from the current binding. nil on an existing journal skips the check
	// (for read-only tools and enrollment); a non-nil empty Config is
	// refused. Every steward owner passes the canonical form of its JSON
	// config (canonjson.CanonicalJSON), so that a config file written
	// differently with the same meaning binds the same.
	Config []byte
	// SegmentSize is the preallocated size at which segments rotate,
	// DefaultSegmentSize when 0, at most MaxSegmentSize. A record larger
	// than a segment gets a segment of its own size. Creating a journal
	// records it in the bind record; an existing journal keeps the size
	// it records, whatever this says, so that a log made with one size
	// opens under another default (a log made before the size was
	// recorded takes this one). SegmentSize reports the size in force.
	SegmentSize int64
	// ReadOnly opens for inspection: no lock is taken, nothing is written,
	// created, moved or removed; a torn tail is reported, not repaired.
	// While the directory's owner runs (its lock is held), a read-only
	// Open reads the log only up to the owner's watermark, what is
	// durable, and judges nothing past it (see "Reading a live journal"
	// in the package documentation).
	ReadOnly bool
	// From, when not nil, is a mark an earlier Journal.Mark returned:
	// Open goes on from it without reading the segments before the
	// mark's, taking the chain and the binding from the mark, and
	// verifies everything after it as a full Open does. A mark that does
	// not match the log is refused with ErrMarkMismatch and nothing on
	// disk is changed, so that the owner can open again without From.
	From *Mark
	// OnRecord, when not nil, is given each record Open verifies, in
	// order, during its one verifying scan: every record after From
	// (every record from 1 without From), bind and rebind records
	// included, each with its Place. An owner rebuilds its state in it
	// instead of iterating the log again after Open. An error from
	// OnRecord stops Open, which changes nothing on disk and returns that
	// error as is. If Open fails for any reason, what OnRecord was given
	// is not a verified log: the owner must discard what it built from
	// it. OnRecord must not call the journal (it has not been returned).
	OnRecord func(Record) error
	// ReplayArchives lets an Open with OnRecord and no From go on when
	// the log's first records were archived (its base): the archives'
	// records are handed to OnRecord first, each archive opened where it
	// was made and verified whole, then the live log's. Without it such
	// an Open is refused with ErrArchived. An owner sets it to rebuild
	// its state (a damaged index, no usable snapshot) from everything.
	ReplayArchives bool
	// Logger receives recovery and failure reports; slog.Default() when nil.
	Logger *slog.Logger
}

// Journal is an open, verified, fsync'd hash-chained append log. Its
// methods are safe for concurrent use.
type Journal struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File // holds the flock; nil when read-only

	mu     sync.Mutex
	idle   sync.Cond // on mu; broadcast when a flush sequence ends
	closed bool
	err    error         // set by a failed fdatasync (matches ErrFailed); every later append returns it
	failed chan struct{} // closed when err is set

	// Durable state: records on disk and acknowledged.
	segs       []segment
	lastSeq    uint64
	head       [hashSize]byte
	owner      string
	format     string
	config     []byte
	binding    [hashSize]byte
	rebinds    int
	recoveries []Recovery
	// segmentSize is the size in force: the bind record's, else
	// Options.SegmentSize. Set by Open, then read-only.
	segmentSize int64

	// Tail state: where the next record goes, counting queued batches.
	tailSeq     uint64
	tailHead    [hashSize]byte
	tailConfig  []byte
	tailOff     int64
	tailSegSize int64
	tailSeg     uint64 // first seq of the segment the tail is in (0: none yet)

	queue    []*batch // batches waiting to be written, in log order
	flushing bool     // a leader is writing; queued batches wait their turn
	free     [][]byte // batch buffers for reuse

	// Found by load for repair.
	torn     *tornTail
	evidence []string
	tmps     []string
	handed   handed // what OnRecord was given, across the attempts of a read-only load
	live     bool   // a read-only load read it while its owner ran (see Live)
	baseTmp  bool   // a base.tmp an interrupted Archive left (removed at a read-write Open)
	fromBase bool   // Options.From is the base's own point: the load went on from the base

	// The base (nil: the log starts at record 1) and the segments it
	// archived that are still here; guarded by mu. archiveMu makes
	// Archive calls one at a time.
	base      *baseBody
	leftover  []string
	archiveMu sync.Mutex

	// Owned by the flushing leader (and by Open and Close).
	seg      *os.File
	segPath  string
	segFirst uint64 // first seq of seg
	segSize  int64  // size of seg
	zeroedTo int64  // seg is written (records or zeros) up to here
	sparse   bool   // seg was extended without fallocate (see preallocate)
	// reallocate is set when a failed write was removed: the next batch
	// preallocates seg again before writing (its space may have been
	// given back, and the disk may have room again).
	reallocate bool
	iov        [2][]byte // pwritev vector, reused
	wm         watermarkFile
}

// Live reports whether a read-only Open read the log while its owner ran:
// then it holds what was durable when it was read, and the owner goes on
// appending after it (a call's reservation may have its outcome there).
func (j *Journal) Live() bool { return j.live }

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Binding returns the current binding: SHA-256 of the config of the bind
// record or of the last rebind.
func (j *Journal) Binding() [32]byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.binding
}

// Config returns the current config bytes, from the bind record or the
// last rebind.
func (j *Journal) Config() []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]byte(nil), j.config...)
}

// Owner returns the owner named by the bind record.
func (j *Journal) Owner() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.owner
}

// Format returns the format named by the bind record.
func (j *Journal) Format() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.format
}

// SegmentSize returns the preallocated size at which the log's segments
// rotate: the one its bind record records, or, for a log made before the
// size was recorded (or not yet bound), Options.SegmentSize.
func (j *Journal) SegmentSize() int64 { return j.segmentSize }

// LastSeq returns the sequence number of the last durable record (0 for an
// empty log).
func (j *Journal) LastSeq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastSeq
}

// Head returns SHA-256 of the last durable record's payload (zero for an
// empty log): the value the next record's Prev will hold.
func (j *Journal) Head() [32]byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.head
}

// Failed returns a channel closed when the journal stops for good
// (ErrFailed): a fdatasync failed, so what is on disk is unknown, or a
// linked record (AppendLinked) was not written, so no later one may be. The owner
// should then exit non-zero, so that its supervisor restarts it and it
// reopens the journal from what is really on disk.
func (j *Journal) Failed() <-chan struct{} { return j.failed }

// Recoveries returns the torn tails moved aside at this open, those found
// (and, read-only, left in place) at this open, and earlier ones known from
// their evidence files.
func (j *Journal) Recoveries() []Recovery {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Recovery(nil), j.recoveries...)
}

// Close waits for appends already accepted to finish, then closes the
// segment and releases the lock. Later calls return ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	j.closed = true
	for j.flushing {
		j.idle.Wait()
	}
	j.mu.Unlock()
	return j.release()
}

// release closes the files Open opened.
func (j *Journal) release() error {
	err := j.wm.close()
	if j.seg != nil {
		if cerr := j.seg.Close(); err == nil {
			err = cerr
		}
		j.seg = nil
	}
	if j.lock != nil {
		if cerr := j.lock.Close(); err == nil {
			err = cerr
		}
		j.lock = nil
	}
	return err
}
