// Package durable writes small files so that they survive a crash: the
// bytes are fsync'd before the file is used, and the directory entry is
// fsync'd after it is created or renamed, without which a crash can forget
// the name even though the data reached the disk.
//
// It serves the stores and configs steward writes once or rarely (keys'
// public halves, bundles, dev-mode configs). Packages journal and wire keep
// their own copies, since they import nothing of steward's.
package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SyncDir fsyncs directory dir, making the entries changed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("%s: fsync directory: %w", dir, err)
	}
	return d.Close()
}

// WriteNew creates path (refusing an existing file or a symlink there),
// writes b, fsyncs the file and then its directory. The file has exactly
// mode, whatever the umask: it is created with mode and then fchmod'ed to
// it, so that a permissive umask cannot open it up and a strict one cannot
// take a bit the caller asked for.
func WriteNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := writeSync(f, b); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteAtomic writes b to a new temporary file beside path (created
// O_EXCL, mode exactly mode as in WriteNew), fsyncs it, renames it over
// path and fsyncs the directory: a reader sees the old bytes or the new
// ones, never a mix, before and after a crash. What was at path before is
// replaced, not written through: an old file's looser mode and a symlink
// there are gone with it.
func WriteAtomic(path string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := writeSync(f, b); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

// writeSync writes b to f, fsyncs and closes it.
func writeSync(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
