package nspawn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// placeFile writes f into the overlay's upper layer before the container
// first boots (an overlay's layers may be changed while it is not mounted),
// so the cache below is never written. Each parent directory missing from
// the upper layer is made with the mode and owner the lower layer gives it,
// so that the merged directory looks as it did; where the lower layer has
// none, root's 0755.
func placeFile(lower, upper string, f File) error {
	if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path || f.Path == "/" {
		return fmt.Errorf("%q is not a clean absolute file path", f.Path)
	}
	rel := strings.TrimPrefix(f.Path, "/")
	parts := strings.Split(filepath.Dir(rel), "/")
	for i := range parts {
		if parts[0] == "." {
			break
		}
		d := filepath.Join(parts[:i+1]...)
		if err := mirrorDir(filepath.Join(lower, d), filepath.Join(upper, d)); err != nil {
			return err
		}
	}
	data := f.Data
	if f.Source != "" {
		var err error
		if data, err = os.ReadFile(f.Source); err != nil {
			return err
		}
	}
	dst := filepath.Join(upper, rel)
	if err := os.WriteFile(dst, data, f.Mode.Perm()); err != nil {
		return err
	}
	// WriteFile's mode went through the umask.
	if err := os.Chmod(dst, f.Mode.Perm()); err != nil {
		return err
	}
	return os.Lchown(dst, 0, 0)
}

// mirrorDir makes dir in the upper layer like its counterpart lowerDir, if
// it is not there yet.
func mirrorDir(lowerDir, dir string) error {
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	mode, uid, gid := os.FileMode(0o755), 0, 0
	fi, err := os.Lstat(lowerDir)
	switch {
	case err == nil && fi.IsDir():
		st := fi.Sys().(*syscall.Stat_t)
		mode, uid, gid = fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky), int(st.Uid), int(st.Gid)
	case err == nil:
		// A symlink (/bin -> usr/bin) or a file in the lower layer: a
		// directory above it would hide it.
		return fmt.Errorf("%s is not a directory in the root file system", lowerDir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
