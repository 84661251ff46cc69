package index

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// The bounds of an index. Each is checked before anything is held or
// written, and a refusal names the bound.
const (
	// MaxPendingEntries and MaxPendingBytes bound the puts held in memory
	// between flushes: a Put that would take the pending set past either
	// flushes it first. Bytes are the keys' and values' lengths together.
	MaxPendingEntries = 4096
	MaxPendingBytes   = 4 << 20

	// MaxKeyBytes and MaxValueBytes bound one entry. An index holds keys
	// (requestIds, big-endian sequence numbers) and places, not payloads:
	// what is larger belongs in the journal.
	MaxKeyBytes   = 1024
	MaxValueBytes = 64 << 10

	// MaxBucketBytes bounds a bucket name: 1 to 64 of A-Za-z0-9._:/-,
	// the journal's kind rules.
	MaxBucketBytes = 64

	// MaxLast bounds the n of Last.
	MaxLast = 10000

	// DefaultLockTimeout is how long Open waits for the file's lock when
	// Options.LockTimeout is 0.
	DefaultLockTimeout = time.Second
)

// metaBucket holds SetMeta's keys. Its name has a character no user
// bucket may have, so no bucket can collide with it.
const metaBucket = "!meta"

// Options configure Open.
type Options struct {
	// LockTimeout bounds how long Open waits for the file's flock held by
	// another opener before it fails with ErrLocked; 0 means
	// DefaultLockTimeout. Open never waits without a bound.
	LockTimeout time.Duration
	// Logger receives what Open repaired or found (a sync at open after a
	// process crash); slog.Default() when nil.
	Logger *slog.Logger
	// ReadOnly opens an existing file for reading only, under a shared
	// lock (so while its owner holds it, Open fails with ErrLocked after
	// LockTimeout): nothing is created, written or synced, and Put and
	// SetMeta fail with ErrReadOnly. A marker of this boot is left for
	// the owner (what a crashed owner wrote is in the kernel's cache and
	// reads as written); one of another boot is a *DamagedError.
	ReadOnly bool
}

// Index is an open index file. It is safe for concurrent use.
//
// Locks, in the order they are taken:
//
//   - flushMu serializes the writers of the file: Flush, Sync and Close
//     (and the flush a full Put makes). It guards dirty and the marker
//     file. A Put or Get never waits for it unless a Put must flush.
//   - mu guards pending, flushing, closed and failed. It is held only to
//     read or change them, never during file I/O.
//
// bbolt's own locks let Gets read the tree while a Flush writes it: a
// read sees the tree before or after the Flush's transaction, and the
// entries of that transaction stay visible in flushing until it has
// committed, so a Get never misses an entry that was Put.
type Index struct {
	path string
	db   *bolt.DB
	log  *slog.Logger

	flushMu sync.Mutex
	dirty   bool // written without fsync since the last Sync (marker exists)

	readOnly bool // Options.ReadOnly: set at Open, never changed

	mu       sync.Mutex
	pending  *overlay // puts not yet flushed
	flushing *overlay // the batch a Flush is writing, until it commits
	closed   bool
	failed   error // a flush failed or the file proved damaged: sticky
}

// Entry is one key and its value, copies the caller may keep.
type Entry struct {
	Key, Value []byte
}

var (
	// ErrLocked is matched by Open's error when another Index (in this
	// process or another) holds the file's lock past the timeout.
	ErrLocked = errors.New("index: locked by another opener")
	// ErrClosed is returned by every method once the index is closed.
	ErrClosed = errors.New("index: closed")
	// ErrFailed is matched by every error after a flush failed: what the
	// file holds past the last successful flush is unknown to this
	// Index, so it refuses everything until it is closed and reopened.
	ErrFailed = errors.New("index: stopped after a failed write; reopen it")
	// ErrDamaged is matched by every *DamagedError.
	ErrDamaged = errors.New("index: damaged")
	// ErrReadOnly refuses a Put or SetMeta on an index opened read-only.
	ErrReadOnly = errors.New("index: opened read-only")
	// ErrBounds is matched by a refusal of a key, value, bucket or n
	// outside the bounds above.
	ErrBounds = errors.New("index: out of bounds")
)

// DamagedError says that the file cannot be trusted: bbolt refused it,
// reading it failed, or it was written without fsync before the machine
// restarted. The owner removes it and rebuilds the index from the journal.
type DamagedError struct {
	Path   string
	Reason string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("index: %s is damaged: %s; remove it and rebuild it from the journal", e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, ErrDamaged) true.
func (e *DamagedError) Unwrap() error { return ErrDamaged }

// Open opens the index at path, creating it (mode 0600) and its directory
// (0700) if absent. The directory must be the process account's and
// reach no one else (no group or other bits), neither it nor the file a
// symlink. A file another opener holds is refused with ErrLocked once
// opts.LockTimeout has passed. A file bbolt refuses, or one written
// without fsync before the machine last restarted, is a *DamagedError.
func Open(path string, opts Options) (*Index, error) {
	if opts.LockTimeout < 0 {
		return nil, fmt.Errorf("index: LockTimeout %v is negative (0 for the default %v)", opts.LockTimeout, DefaultLockTimeout)
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.ReadOnly {
		if _, err := os.Lstat(path); err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
	} else if err := prepareDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	db, err := openBolt(path, opts.LockTimeout, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	x := &Index{path: path, db: db, log: log, pending: newOverlay(), readOnly: opts.ReadOnly}
	if err := x.checkMarker(); err != nil {
		db.Close()
		return nil, err
	}
	return x, nil
}

// openBolt opens the bbolt file without fsync per transaction, mapping
// its refusals to ErrLocked and *DamagedError. bbolt panics on some
// damaged pages as it loads the freelist; that panic is recovered here,
// the lock released and the file closed. The file's memory mapping that
// bbolt had made stays until the process exits (bbolt has no way to
// unmap it after a panic), which is why the lock is released by LOCK_UN:
// a mapping holds the open file, so closing the descriptor would not.
func openBolt(path string, timeout time.Duration, readOnly bool) (db *bolt.DB, err error) {
	var file *os.File
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				unix.Flock(int(file.Fd()), unix.LOCK_UN)
				file.Close()
			}
			db, err = nil, &DamagedError{Path: path, Reason: panicReason(r)}
		}
	}()
	defer faultsPanic()()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      timeout,
		ReadOnly:     readOnly,
		NoSync:       true,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			f, err := openNoFollow(name, flag, mode)
			file = f
			return f, err
		},
	})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("index: %s is open by another owner (flock held past %v): %w", path, timeout, ErrLocked)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return nil, &DamagedError{Path: path, Reason: "bbolt: " + err.Error()}
	default:
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
}

// openNoFollow opens the file as bbolt asks, refusing a symlink, and
// makes a new file exactly 0600 whatever the umask.
func openNoFollow(name string, flag int, mode os.FileMode) (*os.File, error) {
	_, statErr := os.Lstat(name)
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// prepareDir creates dir 0700 if absent and refuses a symlink, a
// non-directory, one group or others can reach, or one owned by another
// uid: the journal's rules for its own directory.
func prepareDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("index: create directory: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("index: chmod new directory: %w", err)
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("index: %s is a symlink; an index directory must be a real directory", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("index: %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("index: %s has mode %04o: group or others have access; want 0700", dir, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("index: %s is owned by uid %d, not by this process's uid %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// checkFile refuses an existing path that is not a regular file of mode
// 0600 (a symlink, a directory, a file others can read).
func checkFile(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("index: %s is a symlink; an index file must be a real file", path)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("index: %s is not a regular file (mode %v)", path, fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		return fmt.Errorf("index: %s has mode %04o; want 0600", path, perm)
	}
	return nil
}

// syncDir fsyncs directory dir, making the entries changed in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("index: fsync directory %s: %w", dir, err)
	}
	return nil
}

// Path is the index file's path.
func (x *Index) Path() string { return x.path }

// Close syncs what is pending (a clean stop leaves nothing for the next
// Open to doubt) and closes the file, releasing its lock. Gets under way
// finish first. A second Close returns ErrClosed.
func (x *Index) Close() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	failed := x.failed
	x.mu.Unlock()
	var err error
	if failed == nil {
		err = x.syncLocked()
	}
	x.mu.Lock()
	x.closed = true
	x.pending = newOverlay()
	x.mu.Unlock()
	if cerr := x.db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("index: close %s: %w", x.path, cerr)
	}
	return err
}

// usable returns the error every method returns once the index is closed
// or has failed. x.mu must be held.
func (x *Index) usable() error {
	if x.closed {
		return ErrClosed
	}
	return x.failed
}
