package installer

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openDirChain opens the absolute, clean directory path one component at a
// time from /, never following a symbolic link, and calls check on each
// directory (/ included) as it was opened. It returns an O_PATH descriptor
// of the last one; the caller closes it. Because each step opens relative
// to the descriptor of the step before, a directory renamed or replaced
// after its check cannot redirect the walk.
func openDirChain(path string, check func(path string, st *unix.Stat_t) error) (int, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return -1, fmt.Errorf("%s: not a clean absolute path", path)
	}
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /: %v", err)
	}
	cur := "/"
	if err := checkFD(fd, cur, check); err != nil {
		unix.Close(fd)
		return -1, err
	}
	for _, comp := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if comp == "" {
			continue
		}
		next := filepath.Join(cur, comp)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, comp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: %v", next, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: directory %s", ErrSymlink, next)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			return -1, fmt.Errorf("%s is a %s, not a directory", next, fileType(st.Mode))
		}
		nfd, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("%s: %v", next, err)
		}
		fd, cur = nfd, next
		if err := checkFD(fd, cur, check); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

func checkFD(fd int, path string, check func(string, *unix.Stat_t) error) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if check == nil {
		return nil
	}
	return check(path, &st)
}
