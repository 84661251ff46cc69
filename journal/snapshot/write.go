package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/internal/failpoint"
)

// The failpoints inside Write (package internal/failpoint), in the order
// Write reaches them: the temporary file written but not fsync'd;
// fsync'd; about to be renamed into place; renamed, the directory not
// yet fsync'd.
const (
	FailBeforeFsync  = "snapshot-before-fsync"
	FailAfterFsync   = "snapshot-after-fsync"
	FailBeforeRename = "snapshot-before-rename"
	FailAfterRename  = "snapshot-after-rename"
)

// Keep is how many snapshots Write leaves in the directory, the new one
// counted: the older ones are removed, oldest first.
const Keep = 3

var (
	// ErrTooLarge is matched by Write's and Load's refusal of a file over
	// MaxBytes.
	ErrTooLarge = errors.New("snapshot: too large")
	// ErrNoSnapshot is matched by Load's error when no snapshot in the
	// directory is valid (or there is none).
	ErrNoSnapshot = errors.New("snapshot: no valid snapshot")
)

func tooLarge(n int64) error {
	return fmt.Errorf("%w: %d bytes, over MaxBytes (%d)", ErrTooLarge, n, MaxBytes)
}

// Written reports what Write did.
type Written struct {
	// Name is the new snapshot's file name in the directory.
	Name string
	// Removed are the older snapshots removed to leave Keep.
	Removed []string
	// Cleaned are temporary files an interrupted Write had left, removed.
	Cleaned []string
}

// Write writes s to dir (created 0700 if absent) as Name(s.Mark.Seq),
// signed by sign when it is not nil (sign gets the digest and returns the
// signature). The file is written under a temporary name, fsync'd,
// renamed into place without replacing anything (a snapshot of the same
// seq is refused with an error matching fs.ErrExist) and the directory
// fsync'd: a crash leaves no new snapshot or a complete one. Then the
// snapshots older than s are removed, oldest first, until Keep are left
// (newer ones, which a Load rejected, are left alone). Temporary files an
// interrupted Write left are removed first, and reported. A file over
// MaxBytes is refused (ErrTooLarge) before anything is written.
func Write(dir string, s Snapshot, sign func(digest []byte) ([]byte, error)) (Written, error) {
	if err := check(s); err != nil {
		return Written{}, fmt.Errorf("snapshot: %w", err)
	}
	if len(s.State) > MaxBytes {
		return Written{}, fmt.Errorf("%w: a state of %d bytes, over MaxBytes (%d)", ErrTooLarge, len(s.State), MaxBytes)
	}
	f, err := encode(s, sign)
	if err != nil {
		return Written{}, err
	}
	if err := prepareDir(dir, true); err != nil {
		return Written{}, err
	}
	w := Written{Name: Name(s.Mark.Seq)}
	var failed []Rejected
	if w.Cleaned, failed, err = cleanTemps(dir); err != nil {
		return w, err
	}
	if len(failed) > 0 {
		return w, fmt.Errorf("snapshot: %s: %s", failed[0].Name, failed[0].Reason)
	}
	target := filepath.Join(dir, w.Name)
	if _, err := os.Lstat(target); err == nil {
		return w, fmt.Errorf("snapshot: %s: %w", target, fs.ErrExist)
	}
	if err := writeNew(dir, target, f); err != nil {
		return w, err
	}
	w.Removed, err = prune(dir, s.Mark.Seq)
	return w, err
}

// writeNew writes b to a temporary file, locked while it exists, and
// renames it to target.
func writeNew(dir, target string, b file) error {
	f, err := os.CreateTemp(dir, tempPattern(filepath.Base(target)))
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	tmp := f.Name()
	// The lock says "a Write is under way" to a cleanup in another
	// process, which removes only temporaries it can lock.
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		err = f.Chmod(0o600) // exactly, whatever the umask
	}
	if err == nil {
		_, err = f.Write(b.head)
	}
	if err == nil {
		_, err = f.Write(b.content)
	}
	failpoint.Hit(FailBeforeFsync)
	if err == nil {
		err = f.Sync()
	}
	failpoint.Hit(FailAfterFsync)
	if err == nil {
		failpoint.Hit(FailBeforeRename)
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, target, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%s: %w", target, fs.ErrExist)
		}
	}
	if err != nil {
		os.Remove(tmp)
		f.Close()
		return fmt.Errorf("snapshot: write %s: %w", target, err)
	}
	failpoint.Hit(FailAfterRename)
	err = durable.SyncDir(dir)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("snapshot: close %s: %w", target, cerr)
	}
	return err
}

// prune removes snapshots older than seq, oldest first, until Keep are
// left, and fsyncs the directory if it removed any.
func prune(dir string, seq uint64) ([]string, error) {
	all, err := list(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, old := range all { // oldest first
		if len(all)-len(removed) <= Keep || old.seq >= seq {
			break
		}
		if err := os.Remove(filepath.Join(dir, old.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("snapshot: remove an old snapshot: %w", err)
		}
		removed = append(removed, old.name)
	}
	if len(removed) > 0 {
		return removed, durable.SyncDir(dir)
	}
	return nil, nil
}

// prepareDir refuses a symlink, a non-directory, a directory group or
// others can reach, or one owned by another uid (the journal's rules);
// with create, it makes an absent dir 0700 first.
func prepareDir(dir string, create bool) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("snapshot: create directory: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("snapshot: chmod new directory: %w", err)
		}
		if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("snapshot: %s is a symlink; a snapshot directory must be a real directory", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("snapshot: %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("snapshot: %s has mode %04o: group or others have access; want 0700", dir, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && create && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("snapshot: %s is owned by uid %d, not by this process's uid %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// RefusedSuffix is appended to the name of a snapshot SetAside moves out
// of the way: evidence, kept, and never listed as a snapshot again.
const RefusedSuffix = ".refused"

// SetAside renames snapshot name of dir, one a Load refused, to name +
// RefusedSuffix (+ ".N" when that is taken: nothing is replaced) and
// fsyncs the directory, so that a Write of the same seq can take its
// place. It returns the new name.
func SetAside(dir, name string) (string, error) {
	if _, ok := parseName(name); !ok {
		return "", fmt.Errorf("snapshot: set aside %q: not a snapshot's name", name)
	}
	from := filepath.Join(dir, name)
	for n := 0; n < 100; n++ {
		to := name + RefusedSuffix
		if n > 0 {
			to = fmt.Sprintf("%s.%d", to, n)
		}
		err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, filepath.Join(dir, to), unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("snapshot: set aside %s: %w", name, err)
		}
		return to, durable.SyncDir(dir)
	}
	return "", fmt.Errorf("snapshot: set aside %s: 100 earlier ones are set aside already", name)
}
