package installer

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// tree is the root an install works in: "/" for the real system, or the
// --root directory. Every path below the root is walked one component at a
// time without following symbolic links, so a link planted inside a --root
// tree (say etc → /etc) cannot redirect a write onto the real system.
type tree struct {
	root string
	// real means the system itself: accounts are created and owners set.
	// In a --root tree owners are left to the installing user, since the
	// accounts exist only in the sysusers.d file there.
	real bool
}

// abs is a root-relative path as shown to the user.
func (t tree) abs(rel string) string { return filepath.Join(t.root, rel) }

// openDir opens directory rel (relative to the root) for reading, never
// following a link. With create, missing directories are made with mode
// 0755 owned by the installer's account, as a package manager would.
func (t tree) openDir(rel string, create bool) (int, error) {
	fd, err := unix.Open(t.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %v", t.root, err)
	}
	cur := t.root
	for _, comp := range strings.Split(filepath.Clean(rel), "/") {
		if comp == "" || comp == "." {
			continue
		}
		cur = filepath.Join(cur, comp)
		nfd, err := unix.Openat(fd, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, comp, 0o700); err == nil {
				nfd, err = unix.Openat(fd, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err == nil {
					err = unix.Fchmod(nfd, 0o755)
				}
				if err == nil {
					err = unix.Fsync(fd)
				}
			}
		}
		unix.Close(fd)
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return -1, fmt.Errorf("%s: not a directory, or a symbolic link, which an install never follows", cur)
			}
			return -1, fmt.Errorf("%s: %w", cur, err)
		}
		fd = nfd
	}
	return fd, nil
}

// lstat examines rel without following a link; ok is false if it does not
// exist (or a directory above it does not).
func (t tree) lstat(rel string) (st unix.Stat_t, ok bool, err error) {
	ok, err = t.inParent(rel, func(dfd int, name string) (bool, error) {
		switch err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err {
		case nil:
			return true, nil
		case unix.ENOENT:
			return false, nil
		default:
			return false, fmt.Errorf("%s: %v", t.abs(rel), err)
		}
	})
	return st, ok, err
}

// inParent runs op on rel's name in its parent directory, opened without
// following a link. A parent that does not exist holds nothing: op does
// not run and the result is false.
func (t tree) inParent(rel string, op func(dfd int, name string) (bool, error)) (bool, error) {
	dfd, err := t.openDir(filepath.Dir(rel), false)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(dfd)
	return op(dfd, filepath.Base(rel))
}

// maxManagedFile bounds what the installer reads back of a file it
// installed; its own files are a few KiB.
const maxManagedFile = 1 << 20

// readFile reads a regular file, never through a link.
func (t tree) readFile(rel string) ([]byte, error) {
	dfd, err := t.openDir(filepath.Dir(rel), false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, filepath.Base(rel), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", t.abs(rel), err)
	}
	f := os.NewFile(uintptr(fd), t.abs(rel))
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManagedFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", t.abs(rel), err)
	}
	if len(b) > maxManagedFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", t.abs(rel), maxManagedFile)
	}
	return b, nil
}

// owner says who should own something: a real install sets it; a --root
// install leaves the installing user's.
type owner struct {
	set      bool
	uid, gid uint32
}

// writeFile installs data at rel with mode and owner, atomically: a hidden
// temporary file beside it (its name has a '.', so sudo's @includedir skips
// it) is written, owned, chmod'ed and fsync'ed, then renamed over rel, and
// the directory fsync'ed.
func (t tree) writeFile(rel string, data []byte, mode uint32, o owner) error {
	dfd, err := t.openDir(filepath.Dir(rel), true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := ".steward-installer." + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("%s: create %s: %v", t.abs(rel), tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil && o.set {
		err = unix.Fchown(fd, int(o.uid), int(o.gid))
	}
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, filepath.Base(rel))
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("%s: %v", t.abs(rel), err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("%s: fsync directory: %v", t.abs(rel), err)
	}
	return nil
}

// mkdir creates directory rel with mode and owner. It is made 0700 first
// and opened up only once it has its owner, so it is never reachable by
// anyone it should not be.
func (t tree) mkdir(rel string, mode uint32, o owner) error {
	dfd, err := t.openDir(filepath.Dir(rel), true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	name := filepath.Base(rel)
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return fmt.Errorf("%s: %v", t.abs(rel), err)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %v", t.abs(rel), err)
	}
	defer unix.Close(fd)
	if o.set {
		if err := unix.Fchown(fd, int(o.uid), int(o.gid)); err != nil {
			return fmt.Errorf("%s: chown: %v", t.abs(rel), err)
		}
	}
	// After chown, which may clear the setgid bit.
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("%s: chmod: %v", t.abs(rel), err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("%s: fsync parent: %v", t.abs(rel), err)
	}
	return nil
}

// remove unlinks a file (a link itself, never its target); absent is fine.
// It reports whether something was removed.
func (t tree) remove(rel string) (bool, error) {
	return t.inParent(rel, func(dfd int, name string) (bool, error) {
		switch err := unix.Unlinkat(dfd, name, 0); err {
		case nil:
			return true, unix.Fsync(dfd)
		case unix.ENOENT:
			return false, nil
		default:
			return false, fmt.Errorf("%s: %v", t.abs(rel), err)
		}
	})
}

// removeAll removes directory rel and everything in it. The walk to its
// parent follows no link; os.RemoveAll then works below the parent's
// descriptor (through /proc/self/fd) and itself never follows a link.
func (t tree) removeAll(rel string) (bool, error) {
	return t.inParent(rel, func(dfd int, name string) (bool, error) {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
			return false, nil
		}
		p := fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)
		if err := os.RemoveAll(p); err != nil {
			return false, fmt.Errorf("%s: %v", t.abs(rel), err)
		}
		return true, unix.Fsync(dfd)
	})
}

// rmdirIfEmpty removes an empty directory and reports whether it did.
func (t tree) rmdirIfEmpty(rel string) (bool, error) {
	return t.inParent(rel, func(dfd int, name string) (bool, error) {
		switch err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err {
		case nil:
			return true, unix.Fsync(dfd)
		case unix.ENOENT, unix.ENOTEMPTY, unix.EEXIST:
			return false, nil
		default:
			return false, fmt.Errorf("%s: %v", t.abs(rel), err)
		}
	})
}

// firstDifference describes where have and want part, for a refusal that
// says what differs.
func firstDifference(have, want []byte) string {
	hl := bytes.Split(have, []byte("\n"))
	wl := bytes.Split(want, []byte("\n"))
	for i := 0; i < len(hl) || i < len(wl); i++ {
		var h, w []byte
		if i < len(hl) {
			h = hl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if !bytes.Equal(h, w) {
			switch {
			case i >= len(hl):
				return fmt.Sprintf("content: line %d missing, want %q", i+1, w)
			case i >= len(wl):
				return fmt.Sprintf("content: extra line %d %q", i+1, h)
			}
			return fmt.Sprintf("content: line %d is %q, want %q", i+1, h, w)
		}
	}
	return "content"
}
