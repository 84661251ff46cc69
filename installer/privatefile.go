package installer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Size bounds of the files the installer reads for the operator (DESIGN.md
// section 8).
const (
	// ToolRequestLimit bounds a controller-tool request file.
	ToolRequestLimit = 256 << 10
	// EnrollRequestLimit bounds a controller-enroll request file.
	EnrollRequestLimit = 8 << 10
)

// Refusals of ReadPrivateFile. Each error it returns wraps exactly one of
// these and names the file (and, for a directory, which one).
var (
	ErrSymlink    = errors.New("symbolic link")
	ErrNotRegular = errors.New("not a regular file")
	ErrHardLinked = errors.New("more than one link")
	ErrOwner      = errors.New("wrong owner")
	ErrMode       = errors.New("mode not 0600 or stricter")
	ErrUnsafeDir  = errors.New("directory another account can write")
	ErrTooLarge   = errors.New("too large")
	ErrChanged    = errors.New("changed while being opened")
)

// testHook, when a test sets it, runs between the steps of ReadPrivateFile
// ("examined": after the lstat, before the open; "checked": after the fstat,
// before the read), so a test can swap the file at exactly those points.
var testHook func(stage string)

// ReadPrivateFile reads a file the invoking operator (ownerUID) handed to
// the installer, which runs as root and so must not be tricked into reading
// something else. It refuses, naming the file and the reason, unless:
//
//   - every directory from / down to the file's is owned by root or ownerUID
//     and not writable by group or others (a root-owned sticky directory
//     such as /tmp is allowed: nobody else can rename or remove what the
//     operator owns in it), and none of them is a symbolic link;
//   - the file is a regular file (not a link, FIFO or device) with one link,
//     owned by ownerUID, mode 0600 or stricter, and at most limit bytes;
//   - the file opened (without following links, without blocking) is the
//     same inode as the one examined, still passing every check.
//
// It reads at most limit+1 bytes, so a file that grows past limit while
// being read is refused too.
func ReadPrivateFile(path string, ownerUID uint32, limit int64) ([]byte, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%s: size limit %d is not positive", path, limit)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	dir, name := filepath.Split(abs)
	if name == "" {
		return nil, fmt.Errorf("%s: %w: a directory", path, ErrNotRegular)
	}
	dirfd, err := openDirChain(filepath.Clean(dir), func(p string, st *unix.Stat_t) error {
		return operatorDirOK(p, st, ownerUID)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(dirfd)

	var before unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &before, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := privateFileOK(&before, ownerUID, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if testHook != nil {
		testHook("examined")
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("%s: %w: replaced by a link while being opened", path, ErrChanged)
		}
		return nil, fmt.Errorf("%s: open: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), abs)
	defer f.Close()
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if after.Dev != before.Dev || after.Ino != before.Ino {
		return nil, fmt.Errorf("%s: %w: the file opened is not the file examined", path, ErrChanged)
	}
	if err := privateFileOK(&after, ownerUID, limit); err != nil {
		return nil, fmt.Errorf("%s: %w (after opening)", path, err)
	}
	if testHook != nil {
		testHook("checked")
	}
	return readAtMost(f, path, limit)
}

// readAtMost reads f, whose size was checked against limit, to its end;
// more than limit bytes means it grew since, which is refused.
func readAtMost(f *os.File, path string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %v", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: grew past the limit of %d bytes while being read", path, ErrTooLarge, limit)
	}
	return data, nil
}

// privateFileOK checks one stat of the file itself.
func privateFileOK(st *unix.Stat_t, ownerUID uint32, limit int64) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return ErrSymlink
	default:
		return fmt.Errorf("%w: file type %s", ErrNotRegular, fileType(st.Mode))
	}
	if st.Nlink != 1 {
		return fmt.Errorf("%w: %d links", ErrHardLinked, st.Nlink)
	}
	if st.Uid != ownerUID {
		return fmt.Errorf("%w: owned by uid %d, want uid %d", ErrOwner, st.Uid, ownerUID)
	}
	if st.Mode&0o7177 != 0 {
		return fmt.Errorf("%w: mode %04o", ErrMode, st.Mode&0o7777)
	}
	if st.Size > limit {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, st.Size, limit)
	}
	return nil
}

// operatorDirOK is the rule for every directory above a private file.
func operatorDirOK(path string, st *unix.Stat_t, ownerUID uint32) error {
	if st.Uid != 0 && st.Uid != ownerUID {
		return fmt.Errorf("%w: directory %s is owned by uid %d", ErrUnsafeDir, path, st.Uid)
	}
	return notWritableByOthers(path, st)
}

// notWritableByOthers refuses a group- or world-writable directory, except a
// root-owned sticky one (/tmp): there, only an entry's owner can rename or
// remove it.
func notWritableByOthers(path string, st *unix.Stat_t) error {
	if st.Mode&0o022 == 0 {
		return nil
	}
	if st.Mode&unix.S_ISVTX != 0 && st.Uid == 0 {
		return nil
	}
	who := "group"
	if st.Mode&0o002 != 0 {
		who = "others"
	}
	return fmt.Errorf("%w: directory %s is writable by %s (mode %04o)", ErrUnsafeDir, path, who, st.Mode&0o7777)
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFREG:
		return "regular file"
	}
	return fmt.Sprintf("unknown (%o)", mode&unix.S_IFMT)
}
