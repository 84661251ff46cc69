package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open opens the journal in dir, creating dir (0700) and the log if absent.
// It locks the directory (a second opener gets ErrLocked), scans and
// verifies every record (CRC-32C, strict decoding, sequence, hash chain,
// bind and rebind records), moves a torn tail aside to an evidence file, and
// checks the owner, format and config binding. Damage other than a torn tail
// refuses to open with a *CorruptError. With opts.ReadOnly nothing is
// locked or written and a torn tail is only reported. With opts.From it
// reads only from that mark on (ErrMarkMismatch when the mark does not
// match); opts.OnRecord is handed each record it verifies.
func Open(dir string, opts Options) (*Journal, error) {
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.SegmentSize < 0 || opts.SegmentSize > MaxSegmentSize {
		return nil, fmt.Errorf("journal: SegmentSize %d is not 1 to %d (0 for the default)", opts.SegmentSize, MaxSegmentSize)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var config []byte
	if opts.Config != nil {
		if len(opts.Config) == 0 {
			return nil, fmt.Errorf("journal: config for %s: %w", dir, errEmptyConfig)
		}
		// A copy: the journal keeps the bytes it binds, and the caller
		// may reuse its slice.
		config = bytes.Clone(opts.Config)
	}
	if m := opts.From; m != nil {
		if reason := m.inconsistency(); reason != "" {
			return nil, markMismatch(dir, m, reason)
		}
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, markMismatch(dir, m, "there is no journal directory")
		}
	}
	if err := prepareDir(dir, opts.ReadOnly); err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, opts: opts, log: log, failed: make(chan struct{})}
	j.idle.L = &j.mu
	if !opts.ReadOnly {
		if err := j.takeLock(); err != nil {
			return nil, err
		}
	}
	// Nothing is changed on disk before the log is known to be this
	// owner's: a refused Open leaves the directory as it was.
	err := j.load()
	if err == nil {
		err = j.checkBinding(config)
	}
	if err == nil && !opts.ReadOnly {
		j.wm.open(dir, j.markLocked().watermark(), log)
	}
	if err == nil {
		err = j.repair()
	}
	if err == nil {
		err = j.bind(config)
	}
	if err != nil {
		j.release()
		var he *handError
		if errors.As(err, &he) {
			return nil, he.err
		}
		return nil, err
	}
	return j, nil
}

// prepareDir creates dir 0700 if absent and refuses a symlink, a
// non-directory, a directory group or others can reach, or (read-write) one
// owned by another uid.
func prepareDir(dir string, readOnly bool) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) && !readOnly {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("journal: create directory: %w", err)
		}
		// Mkdir's mode is filtered by the umask; make it exactly 0700.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("journal: chmod new directory: %w", err)
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("journal: %s is a symlink; a journal directory must be a real directory", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("journal: %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("journal: %s has mode %04o: group or others have access; want 0700", dir, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && !readOnly && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("journal: %s is owned by uid %d, not by this process's uid %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// takeLock flocks the lock file inside the directory. flock locks belong to
// the open file description, so a second Open in the same process is
// refused just like another process.
func (j *Journal) takeLock() error {
	path := filepath.Join(j.dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: open lock file: %w", err)
	}
	if err := flockOwner(int(f.Fd())); err != nil {
		f.Close()
		if errors.Is(err, errHeldShared) {
			return fmt.Errorf("journal: %s: the flock on %s was %v (readers probe it for a moment only): %w", j.dir, path, err, ErrLocked)
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("journal: %s is open by another owner (flock on %s held): %w", j.dir, path, ErrLocked)
		}
		return fmt.Errorf("journal: flock %s: %w", path, err)
	}
	j.lock = f
	return nil
}

// repair, after the log was verified and its binding checked, moves a torn
// tail aside, removes unfinished segment files and preallocates a short
// last segment again (read-write only), and lists earlier recoveries.
func (j *Journal) repair() error {
	var moved string
	if j.torn != nil && !j.opts.ReadOnly {
		r, err := j.moveAside(j.torn)
		if err != nil {
			return err
		}
		moved = r.Evidence
		j.recoveries = append(j.recoveries, r)
	}
	j.torn = nil
	earlier, err := earlierRecoveries(j.dir, j.evidence, moved)
	if err != nil {
		return err
	}
	j.recoveries = append(earlier, j.recoveries...)
	if j.opts.ReadOnly {
		return nil
	}
	for _, t := range j.tmps {
		// A crash while creating a segment leaves its zero-filled
		// temporary file; it never held a record.
		if err := os.Remove(filepath.Join(j.dir, t)); err != nil {
			return fmt.Errorf("journal: remove unfinished segment: %w", err)
		}
		j.log.Warn("journal: removed unfinished segment file left by a crash", "dir", j.dir, "file", t)
	}
	if len(j.tmps) > 0 {
		if err := syncDir(j.dir); err != nil {
			return err
		}
	}
	if n := len(j.segs); n > 0 && j.segs[n-1].size < j.segmentSize {
		// A last segment shorter than its preallocation (copied, or cut
		// short): preallocate it again so that appends do not grow it.
		last := &j.segs[n-1]
		sparse, err := preallocate(j.seg, j.segmentSize, j.log)
		if err != nil {
			return err
		}
		j.sparse = sparse
		if err := unix.Fdatasync(int(j.seg.Fd())); err != nil {
			return fmt.Errorf("journal: fdatasync %s: %w", j.segPath, err)
		}
		last.size = j.segmentSize
		j.tailSegSize = last.size
	}
	if n := len(j.segs); n > 0 {
		j.segSize, j.zeroedTo = j.segs[n-1].size, j.segs[n-1].end
	}
	return nil
}

// bind writes record 1 for a new (or emptied) log. config is
// Options.Config or nil.
func (j *Journal) bind(config []byte) error {
	if j.lastSeq == 0 {
		if j.opts.ReadOnly {
			return nil
		}
		if j.opts.Owner == "" || j.opts.Format == "" {
			return fmt.Errorf("journal: creating the log in %s needs Options.Owner and Options.Format", j.dir)
		}
		if config == nil {
			config = []byte("{}")
		}
		body, err := bindRecordBody(j.opts.Owner, j.opts.Format, config, j.segmentSize)
		if err != nil {
			return fmt.Errorf("journal: encode bind record: %w", err)
		}
		if _, err := j.submit(kindBind, body, config, nil); err != nil {
			return err
		}
		j.mu.Lock()
		j.owner, j.format = j.opts.Owner, j.opts.Format
		j.mu.Unlock()
	}
	return nil
}

// checkBinding refuses an existing log whose owner, format or binding
// differs from the options. config is Options.Config or nil. Opened from
// a mark, the owner, format and binding are the mark's word (and the
// rebinds after it), so a difference is the mark's mismatch: the Open
// without From that follows gives the log's own verdict.
func (j *Journal) checkBinding(config []byte) error {
	if j.lastSeq == 0 {
		return nil
	}
	problem := j.ownerProblem(j.owner, j.format)
	if problem == "" && config != nil {
		if got := sha256.Sum256(config); got != j.binding {
			problem = fmt.Sprintf("is bound to config %x but the given config hashes to %x (change it with an explicit rebind)", j.binding, got)
		}
	}
	return j.bindingError(problem)
}

// ownerProblem says how owner and format differ from the options, or "".
func (j *Journal) ownerProblem(owner, format string) string {
	if j.opts.Owner != "" && j.opts.Owner != owner {
		return fmt.Sprintf("belongs to owner %q, not %q", owner, j.opts.Owner)
	}
	if j.opts.Format != "" && j.opts.Format != format {
		return fmt.Sprintf("holds format %q, not %q", format, j.opts.Format)
	}
	return ""
}

// bindingError is the error of a binding problem: ErrBindingMismatch, or
// ErrMarkMismatch when the binding is the From mark's word.
func (j *Journal) bindingError(problem string) error {
	switch {
	case problem == "":
		return nil
	case j.opts.From != nil:
		return markMismatch(j.dir, j.opts.From, "by the mark, the log "+problem)
	}
	return fmt.Errorf("journal: %s %s: %w", j.dir, problem, ErrBindingMismatch)
}
