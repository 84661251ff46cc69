package index

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// bootIDPath names this boot of the machine: a marker from another boot
// means the machine restarted while the file had writes not fsync'd.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// MarkerSuffix is appended to the index file's path to name its marker:
// a file that exists, fsync'd, while the index holds writes that were not
// fsync'd, and says in which boot of the machine they were made.
const MarkerSuffix = ".unsynced"

// fillPercent is how full bbolt fills a page before it splits it
// (default 0.5). An index is written, almost only inserted into, and
// mostly in key order (sequence keys), where pages split at half stay
// half empty for good: with 0.9 the file of a million sequence keys is
// 64 MiB instead of 97 (measured: BenchmarkGetRSS's file-KiB).
const fillPercent = 0.9

// Flush writes every pending put in one bbolt transaction, without fsync:
// after it a process crash loses nothing, a power loss may lose or damage
// what was written since the last Sync (see the marker in the package
// doc). A failed write stops the index for good (ErrFailed).
func (x *Index) Flush() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	return x.flushLocked()
}

// Sync flushes and fsyncs the file, then removes the marker: everything
// Put (and SetMeta) before it is durable. An owner calls it before a
// snapshot names the journal mark the index covers. A failed fsync stops
// the index for good: what is on disk is unknown.
func (x *Index) Sync() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	return x.syncLocked()
}

// syncLocked is Sync with flushMu held.
func (x *Index) syncLocked() error {
	if err := x.flushLocked(); err != nil {
		return err
	}
	if !x.dirty {
		return nil
	}
	if err := x.db.Sync(); err != nil {
		return x.fail(fmt.Errorf("index: fdatasync %s: %w: %w", x.path, err, ErrFailed))
	}
	if err := os.Remove(x.marker()); err != nil {
		return x.fail(fmt.Errorf("index: remove marker: %w: %w", err, ErrFailed))
	}
	if err := syncDir(filepath.Dir(x.path)); err != nil {
		return x.fail(fmt.Errorf("%w: %w", err, ErrFailed))
	}
	x.dirty = false
	return nil
}

// flushLocked is Flush with flushMu held. The batch moves from pending
// to flushing, where Gets still find it, and leaves flushing only once
// its transaction has committed.
func (x *Index) flushLocked() error {
	x.mu.Lock()
	if err := x.usable(); err != nil {
		x.mu.Unlock()
		return err
	}
	batch := x.pending
	if batch.n == 0 {
		x.mu.Unlock()
		return nil
	}
	x.pending, x.flushing = newOverlay(), batch
	x.mu.Unlock()
	err := x.markDirty()
	if err == nil {
		err = x.write(batch)
	}
	x.mu.Lock()
	x.flushing = nil
	x.mu.Unlock()
	if err != nil {
		return x.fail(err)
	}
	return nil
}

// write puts the batch in one transaction, each bucket's keys in order.
func (x *Index) write(batch *overlay) error {
	return x.guard(func() error {
		return x.db.Update(func(tx *bolt.Tx) error {
			for _, name := range slices.Sorted(maps.Keys(batch.buckets)) {
				b, err := tx.CreateBucketIfNotExists([]byte(name))
				if err != nil {
					return fmt.Errorf("index: bucket %q: %w", name, err)
				}
				b.FillPercent = fillPercent
				m := batch.buckets[name]
				for _, k := range slices.Sorted(maps.Keys(m)) {
					if err := b.Put([]byte(k), m[k]); err != nil {
						return fmt.Errorf("index: put in %q: %w", name, err)
					}
				}
			}
			return nil
		})
	})
}

// fail makes err sticky: every later call returns it. A *DamagedError
// stays one; anything else is wrapped to match ErrFailed.
func (x *Index) fail(err error) error {
	if !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrFailed) {
		err = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	x.mu.Lock()
	if x.failed == nil {
		x.failed = err
	}
	x.mu.Unlock()
	return err
}

// guard runs fn, a call into bbolt, turning a panic (bbolt's on a page it
// finds inconsistent) or a memory fault (a page past the end of a
// truncated file) into a *DamagedError, which stops the index for good.
func (x *Index) guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = x.fail(&DamagedError{Path: x.path, Reason: panicReason(r)})
		}
	}()
	defer faultsPanic()()
	err = fn()
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// panicReason says what a recovered panic of bbolt's means.
func panicReason(r any) string {
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		return fmt.Sprintf("bbolt: memory fault at %#x reading the mapped file (was it truncated?)", f.Addr())
	}
	return strings.ReplaceAll(fmt.Sprint("bbolt: ", r), "\n", " ")
}

// faultsPanic makes a memory fault in this goroutine a panic that can be
// recovered, instead of a crash, and returns what restores the setting.
func faultsPanic() func() {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}

// marker is the path of the index's marker file.
func (x *Index) marker() string { return x.path + MarkerSuffix }

// markDirty, before the first write without fsync since the last Sync,
// creates the marker with this boot's id and makes it durable, so that a
// power loss can never leave unsynced writes without a marker.
func (x *Index) markDirty() error {
	if x.dirty {
		return nil
	}
	boot, err := bootID()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(x.marker(), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("index: create marker: %w", err)
	}
	_, err = f.WriteString(boot + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("index: write marker %s: %w", x.marker(), err)
	}
	if err := syncDir(filepath.Dir(x.path)); err != nil {
		return err
	}
	x.dirty = true
	return nil
}

// checkMarker, at Open, judges a marker left by the last owner: from this
// boot, the owner crashed but the kernel holds every write it made, so
// they are fsync'd now and the marker removed; from another boot, the
// machine restarted before those writes were fsync'd, and the file may
// hold pages of different transactions: it is damaged.
func (x *Index) checkMarker() error {
	b, err := os.ReadFile(x.marker())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: read marker: %w", err)
	}
	boot, err := bootID()
	if err != nil {
		return err
	}
	if was := strings.TrimSpace(string(b)); was != boot {
		return &DamagedError{Path: x.path, Reason: fmt.Sprintf(
			"written without fsync in boot %s, and the machine has restarted since (boot %s)", was, boot)}
	}
	if x.readOnly {
		return nil // the owner syncs it at its next open
	}
	x.dirty = true
	if err := x.syncLocked(); err != nil {
		return err
	}
	x.log.Info("index: synced the writes a crashed owner left without fsync", "index", x.path)
	return nil
}

// bootID returns this boot's id.
func bootID() (string, error) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return "", fmt.Errorf("index: read the boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
