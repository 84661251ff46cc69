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

// WriteNew creates path (refusing an existing file), writes b, fsyncs the
// file and then its directory.
func WriteNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := writeSync(f, b); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteAtomic writes b to a temporary file beside path, fsyncs it, renames
// it over path and fsyncs the directory: a reader sees the old bytes or the
// new ones, never a mix, before and after a crash.
func WriteAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
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
	return SyncDir(filepath.Dir(path))
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
