package histbench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// mem is a process's memory from /proc/PID/status, in bytes: VmRSS, of
// it RssAnon (its heap and stacks: what it holds, not the pages of files
// it maps, such as a bbolt index, which the kernel may take back), and
// VmHWM, the peak of VmRSS.
type mem struct{ rss, anon, hwm int64 }

func memOf(pid int) (mem, error) {
	var m mem
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	fields := map[string]*int64{"VmRSS": &m.rss, "RssAnon": &m.anon, "VmHWM": &m.hwm}
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, ":")
		if !ok || fields[name] == nil {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("/proc/%d/status: %q", pid, l)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, err
		}
		*fields[name] = kb << 10
	}
	return m, nil
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuOf is the user and system CPU time process pid has used, all its
// threads, from /proc/PID/stat (to the clock tick).
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command (in parentheses) start with the state:
	// utime and stime are the 12th and 13th of them.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * clockTick, nil
}

// diskOf is each daemon's history on disk: its journal directory, and
// beside it the snapshots and the history index (DESIGN.md section 13),
// absent in a state from before them.
func diskOf(l dev.Layout) (map[string]Disk, error) {
	out := map[string]Disk{}
	for name, dir := range journalDirs(l) {
		var d Disk
		part := filepath.Dir(dir)
		for _, sub := range []struct {
			dir  string
			used *int64
		}{{dir, &d.Used}, {filepath.Join(part, "snapshots"), &d.Snapshots}, {filepath.Join(part, "index"), &d.Index}} {
			files, apparent, used, err := treeSize(sub.dir)
			if err != nil {
				return nil, err
			}
			d.Files += files
			d.Apparent += apparent
			*sub.used += used
		}
		out[name] = d
	}
	return out, nil
}

// treeSize is the files under dir, their bytes and the bytes allocated
// to them (st_blocks); all 0 when dir does not exist.
func treeSize(dir string) (files int, apparent, used int64, err error) {
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return fs.SkipAll
		}
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		files++
		apparent += fi.Size()
		used += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	return files, apparent, used, err
}

// recordsOf counts each journal's records by kind, reading it read-only
// (every record verified, as an open does), and adds the bytes its
// records take (up to the end of the last record of each segment) to
// disk.
func recordsOf(l dev.Layout, disk map[string]Disk) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	for name, dir := range journalDirs(l) {
		j, err := journal.Open(dir, journal.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		kinds := map[string]int{}
		err = j.Iterate(1, func(r journal.Record) error { kinds[r.Kind]++; return nil })
		d := disk[name]
		for _, sg := range j.Summary().Segments {
			d.Data += sg.Used
		}
		disk[name] = d
		if err := errors.Join(err, j.Close()); err != nil {
			return nil, err
		}
		out[name] = kinds
	}
	return out, nil
}

func readJournal(dir string, fn func(journal.Record) error) error {
	j, err := journal.Open(dir, journal.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer j.Close()
	return j.Iterate(1, fn)
}

// errFound stops a journal's iteration at the record sought.
var errFound = errors.New("found")

// appRecord is the body of the appliance's answer record (appliance/doc.go).
type appRecord struct {
	RequestID  string `cbor:"requestId"`
	BodySHA256 []byte `cbor:"bodySha256"`
	Status     int    `cbor:"status"`
	Response   []byte `cbor:"response"`
}

// oldestOnDisk reads, from a stopped state, the oldest call's invocation
// (its begin in the controller's journal, which keeps the exact body) and
// the answer the appliance recorded for it (its first record).
func oldestOnDisk(l dev.Layout, o *OldestCall) error {
	dirs := journalDirs(l)
	err := readJournal(dirs["controller"], func(r journal.Record) error {
		if r.Kind != ledger.KindBegin {
			return nil
		}
		var b ledger.Begin
		if err := wire.Unmarshal(r.Body, &b); err != nil {
			return fmt.Errorf("controller record %d: %w", r.Seq, err)
		}
		if b.Attempt != o.Attempt {
			return fmt.Errorf("the controller's first begin is of attempt %s, not the oldest call's %s", b.Attempt, o.Attempt)
		}
		o.AppBody = b.Body
		return errFound
	})
	if !errors.Is(err, errFound) {
		return fmt.Errorf("the oldest call's begin: %w", errors.Join(err, errors.New("not in the controller's journal")))
	}
	err = readJournal(dirs["appliance"], func(r journal.Record) error {
		if r.Kind != "answer" {
			return nil
		}
		var a appRecord
		if err := wire.Unmarshal(r.Body, &a); err != nil {
			return fmt.Errorf("appliance record %d: %w", r.Seq, err)
		}
		o.AppStatus, o.AppAnswer = a.Status, a.Response
		return errFound
	})
	if !errors.Is(err, errFound) {
		return fmt.Errorf("the oldest call's answer: %w", errors.Join(err, errors.New("not in the appliance's journal")))
	}
	return nil
}

// copyTree copies directory src to dst (which must not exist), files and
// modes; dst's files are written whole, so a preallocated segment takes
// its room in the copy as in the original.
func copyTree(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("copy to %s: %w", dst, fs.ErrExist)
	}
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			return os.Chmod(to, fi.Mode().Perm())
		case fi.Mode().IsRegular():
			return copyFile(path, to, fi.Mode().Perm())
		}
		return fmt.Errorf("copy %s: neither a file nor a directory (%v)", path, fi.Mode())
	})
}

func copyFile(from, to string, mode fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// restore makes dst a fresh copy of src: whatever was at dst is removed.
func restore(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return copyTree(src, dst)
}
