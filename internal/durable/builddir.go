package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stewardrt/steward/internal/failpoint"
)

// FailBeforeRename is the failpoint at which BuildDir has built and synced
// the temporary directory but not yet renamed it into place: a crash there
// leaves a stale temporary, which the next BuildDir removes.
const FailBeforeRename = "builddir-before-rename"

// ErrBuildUnderWay is wrapped by BuildDir's error when another process is
// building the same target (it holds the lock on its temporary).
var ErrBuildUnderWay = errors.New("another init of it is under way")

// TempPrefix is the prefix of the name of the temporary directory BuildDir
// builds target in, beside it: "." + base(target) + ".init-"; a random
// suffix follows. Nothing else uses the pattern, which is what makes a
// temporary without a holder safe to remove.
func TempPrefix(target string) string { return "." + filepath.Base(target) + ".init-" }

// BuildDir creates directory target whole or not at all. It makes a
// temporary directory beside target (same file system, so that the rename
// is atomic), with exactly mode, holds an flock on it while build fills
// it, fsyncs every file and directory in it, renames it to target (refusing
// to replace anything there) and fsyncs the parent. On any failure the
// temporary is removed and target does not exist.
//
// A temporary of target's pattern that no process holds locked was left by
// a crashed BuildDir (a SIGKILL, a power cut; the kernel drops a dead
// process's flock): it is removed before the build, and the removal logged
// on log. One that is held belongs to a build under way: BuildDir refuses
// with an error wrapping ErrBuildUnderWay. A target that exists already is
// refused with an error wrapping fs.ErrExist.
func BuildDir(target string, mode os.FileMode, log *slog.Logger, build func(tmp string) error) error {
	parent := filepath.Dir(target)
	if _, err := os.Lstat(target); err == nil {
		return fmt.Errorf("%s: %w", target, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := removeStale(target, log); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, TempPrefix(target)+"*")
	if err != nil {
		return err
	}
	lock, err := lockDir(tmp)
	if err == nil {
		err = buildIn(tmp, target, mode, build)
		lock.Close()
	}
	if err != nil {
		if rerr := os.RemoveAll(tmp); rerr != nil {
			log.Error("removing the temporary of a failed init", "temporary", tmp, "err", rerr)
		}
		return err
	}
	return SyncDir(parent)
}

// buildIn runs build in tmp, syncs it whole and renames it to target.
func buildIn(tmp, target string, mode os.FileMode, build func(string) error) error {
	// MkdirTemp makes 0700 under the umask; the directory must be exactly mode.
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	if err := build(tmp); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	failpoint.Hit(FailBeforeRename)
	return renameNoReplace(tmp, target)
}

// removeStale removes every temporary of target's pattern that no process
// holds, and refuses when one is held.
func removeStale(target string, log *slog.Logger) error {
	parent, prefix := filepath.Dir(target), TempPrefix(target)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.IsDir() {
			continue
		}
		tmp := filepath.Join(parent, e.Name())
		lock, err := lockDir(tmp)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%w: its temporary %s is locked", ErrBuildUnderWay, tmp)
		}
		if err != nil {
			return err
		}
		err = os.RemoveAll(tmp)
		lock.Close()
		if err != nil {
			return fmt.Errorf("removing the temporary %s of an interrupted init: %w", tmp, err)
		}
		log.Warn("removed the temporary left by an interrupted init", "temporary", tmp, "target", target)
	}
	return nil
}

// lockDir opens dir and takes an exclusive flock on it without waiting;
// the lock lasts until the returned file is closed or the process dies.
func lockDir(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: flock: %w", dir, err)
	}
	return d, nil
}

// syncTree fsyncs every regular file and directory under root, the
// directories after their entries, so that the tree is durable before it is
// renamed into place (a rename that survives a crash must not expose files
// whose data did not).
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, path)
		case d.Type().IsRegular():
			return syncFile(path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := SyncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%s: fsync: %w", path, err)
	}
	return f.Close()
}

// renameNoReplace renames tmp to target, refusing (fs.ErrExist) when
// anything is at target: a plain rename would silently replace an empty
// directory made there meanwhile.
func renameNoReplace(tmp, target string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, target, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: %w", target, fs.ErrExist)
	}
	return &os.LinkError{Op: "rename", Old: tmp, New: target, Err: err}
}
