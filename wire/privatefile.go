package wire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// UnsafeFileError is OpenPrivateFile's refusal: the file, and why. It
// matches ErrUnsafeFile.
type UnsafeFileError struct {
	Path   string
	Reason string
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrUnsafeFile, e.Path, e.Reason)
}

// Unwrap makes the error match ErrUnsafeFile.
func (e *UnsafeFileError) Unwrap() error { return ErrUnsafeFile }

// OpenPrivateFile opens path (made absolute) for reading, refusing a file
// another account could have written or can read: it must be a regular
// file (not a symlink), owned by this process's euid, with no permission
// for group or other (0600 or stricter), and every directory above it
// must be one only root or this account can change (CheckSocketPath's
// rule for ancestors, a root-owned sticky directory such as /tmp
// admitted). The ancestors are checked first, so that no other account
// can swap the file between the check and the open; the file's own
// checks are made on the opened descriptor (fstat), and the open
// follows no symlink and does not block on a FIFO. Every refusal is an
// *UnsafeFileError (ErrUnsafeFile); a file that is not there is
// fs.ErrNotExist, as os.Open says.
func OpenPrivateFile(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	euid := uint32(os.Geteuid())
	if err := checkAncestors(abs, euid); err != nil {
		var ae *ancestorError
		if errors.As(err, &ae) && ae.err != nil {
			return nil, ae.err
		}
		return nil, &UnsafeFileError{Path: path, Reason: err.Error()}
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, &UnsafeFileError{Path: path, Reason: "is a symlink"}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	reason := ""
	switch perm := st.Mode & 0o777; {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		reason = "is not a regular file"
	case st.Uid != euid:
		reason = fmt.Sprintf("is owned by uid %d, not by this account (uid %d)", st.Uid, euid)
	case perm&0o077 != 0:
		reason = fmt.Sprintf("has mode %04o: other accounts may read or change it (want 0600 or stricter: chmod 600)", perm)
	}
	if reason != "" {
		f.Close()
		return nil, &UnsafeFileError{Path: path, Reason: reason}
	}
	return f, nil
}
