package wire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func unsafePath(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnsafePath, path, fmt.Sprintf(format, args...))
}

// CheckSocketPath checks, before dialling, that path is a socket owned by
// ownerUID and that every ancestor directory is a real directory (not a
// symlink), owned by root, this process's euid or ownerUID, and not
// writable by group or other; a root-owned sticky directory such as /tmp is
// admitted even if world-writable. path must be absolute. Every error wraps
// ErrUnsafePath and names the path and the reason.
func CheckSocketPath(path string, ownerUID uint32) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return unsafePath(path, "not an absolute, clean path")
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return unsafePath(path, "is not a socket (mode %v)", fi.Mode())
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != ownerUID {
		return unsafePath(path, "socket is owned by uid %d, want uid %d", uid, ownerUID)
	}
	if err := checkAncestors(path, ownerUID); err != nil {
		var ae *ancestorError
		if errors.As(err, &ae) && ae.err != nil {
			return fmt.Errorf("%w: %s: ancestor: %w", ErrUnsafePath, path, ae.err)
		}
		return unsafePath(path, "%s", err.Error())
	}
	return nil
}

// ancestorError is why an ancestor directory of a path fails the checks:
// a reason, or the error its Lstat met.
type ancestorError struct {
	reason string
	err    error
}

func (e *ancestorError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.reason
}

// checkAncestors checks every ancestor directory of path, up to "/", as
// CheckSocketPath says (owned by root, this process's euid or ownerUID;
// not writable by group or other, unless a root-owned sticky directory).
// The error is an *ancestorError.
func checkAncestors(path string, ownerUID uint32) error {
	euid := uint32(os.Geteuid())
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if err := checkAncestor(dir, ownerUID, euid); err != nil {
			return err
		}
		if dir == "/" {
			return nil
		}
	}
}

func checkAncestor(dir string, ownerUID, euid uint32) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return &ancestorError{err: err}
	}
	if fi.Mode().Type() == os.ModeSymlink {
		return &ancestorError{reason: fmt.Sprintf("ancestor %s is a symlink", dir)}
	}
	if !fi.IsDir() {
		return &ancestorError{reason: fmt.Sprintf("ancestor %s is not a directory", dir)}
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if uid != 0 && uid != euid && uid != ownerUID {
		return &ancestorError{reason: fmt.Sprintf("ancestor %s is owned by uid %d, not by root, uid %d or uid %d", dir, uid, euid, ownerUID)}
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	if uid == 0 && fi.Mode()&os.ModeSticky != 0 {
		return nil // e.g. /tmp: others may create entries but not replace ours
	}
	who := "group"
	if perm&0o002 != 0 {
		who = "world"
	}
	return &ancestorError{reason: fmt.Sprintf("ancestor %s is %s-writable (mode %04o) and not a root-owned sticky directory", dir, who, perm)}
}
