package nspawn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupPrefix names the cgroups the harness makes for its containers, and
// machinePrefix the containers (followed by 8 hex digits).
const (
	cgroupPrefix  = "steward-nspawn-"
	machinePrefix = "steward-"
)

// nspawnRunDir is where systemd-nspawn keeps its host-side state (image
// locks, the per-machine directory it propagates mounts through).
const nspawnRunDir = "/run/systemd/nspawn"

// hierarchy is one cgroup hierarchy systemd-nspawn uses: the unified
// (cgroup2) one, or the named v1 hierarchy name=systemd of a hybrid layout.
type hierarchy struct {
	// base is the directory of this process's own cgroup in it, under
	// which the containers' cgroups are made.
	base    string
	unified bool
}

// hierarchies finds the cgroup hierarchies systemd-nspawn places itself
// in, from /proc/self/mountinfo and /proc/self/cgroup.
func hierarchies() ([]hierarchy, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	path := map[string]string{} // "" for unified, "name=systemd" for v1
	for _, line := range strings.Split(string(own), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			path[""] = f[2]
		case f[1] == "name=systemd":
			path["name=systemd"] = f[2]
		}
	}
	var hs []hierarchy
	seen := map[string]bool{}
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		mount, fstype, opts := pf[4], qf[0], strings.Split(qf[2], ",")
		var key string
		switch {
		case fstype == "cgroup2":
			key = ""
		case fstype == "cgroup" && slices.Contains(opts, "name=systemd"):
			key = "name=systemd"
		default:
			continue
		}
		p, ok := path[key]
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		hs = append(hs, hierarchy{base: filepath.Join(mount, p), unified: key == ""})
	}
	if len(hs) == 0 {
		return nil, errors.New("no cgroup2 or name=systemd hierarchy is mounted")
	}
	return hs, nil
}

// containerCgroups is the cgroup of one container in every hierarchy.
type containerCgroups struct {
	dirs    []string
	unified string // the one in the unified hierarchy, or ""
}

// makeCgroups makes the container's cgroup in each hierarchy.
func makeCgroups(hs []hierarchy, machine string) (containerCgroups, error) {
	var cg containerCgroups
	for _, h := range hs {
		dir := filepath.Join(h.base, cgroupPrefix+machine)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove(time.Second)
			return containerCgroups{}, fmt.Errorf("making the container's cgroup: %w", err)
		}
		cg.dirs = append(cg.dirs, dir)
		if h.unified {
			cg.unified = dir
		}
	}
	return cg, nil
}

// remove waits (within limit) until no process is left in the container's
// cgroup, then removes it with everything nspawn made under it.
func (cg containerCgroups) remove(limit time.Duration) error {
	var errs []error
	if cg.unified != "" {
		if err := waitUnpopulated(cg.unified, limit); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range cg.dirs {
		if err := removeCgroupTree(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes a cgroup and the cgroups under it, deepest
// first; a cgroup is removed with rmdir, which fails while a process is in
// it.
func removeCgroupTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing cgroup %s: %w", d, err)
		}
	}
	return nil
}

// waitUnpopulated blocks until dir's cgroup.events says "populated 0"
// (cgroup2 signals each change of it to inotify as a modification).
func waitUnpopulated(dir string, limit time.Duration) error {
	events := filepath.Join(dir, "cgroup.events")
	populated := func() (bool, error) {
		raw, err := os.ReadFile(events)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return strings.Contains(string(raw), "populated 1"), nil
	}
	return waitInotify(events, unix.IN_MODIFY, limit, func() (bool, error) {
		p, err := populated()
		return !p, err
	})
}

// cleanNspawnRun removes what systemd-nspawn left on the host for machine.
// With exclusive set (no container of this harness runs) it also removes
// the directories of nspawnRunDir that are empty.
func cleanNspawnRun(machine string, exclusive bool) error {
	var errs []error
	for _, sub := range []string{"propagate", "unix-export", "incoming"} {
		p := filepath.Join(nspawnRunDir, sub, machine)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if exclusive {
		for _, sub := range []string{"propagate", "unix-export", "incoming", "locks", ""} {
			err := unix.Rmdir(filepath.Join(nspawnRunDir, sub))
			if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sweepStale removes the empty cgroups, and nspawn's files under
// nspawnRunDir, of containers whose test process died before its cleanup.
// Only called while no container of this harness runs (the exclusive
// running lock): what a running Boot made is then never taken for stale.
func sweepStale(hs []hierarchy) error {
	var errs []error
	for _, sub := range []string{"propagate", "unix-export", "incoming"} {
		stale, _ := filepath.Glob(filepath.Join(nspawnRunDir, sub, machinePrefix+"????????"))
		for _, p := range stale {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, h := range hs {
		stale, _ := filepath.Glob(filepath.Join(h.base, cgroupPrefix+"*"))
		for _, d := range stale {
			if err := removeCgroupTree(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// runningLock is the shared lock every running container holds; taking it
// exclusively (without waiting) tells that none runs.
const runningLock = CacheDir + "/.running.lock"

// tryExclusive runs fn if no container of this harness runs, holding the
// exclusive running lock meanwhile.
func tryExclusive(fn func()) error {
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(runningLock, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	fn()
	return nil
}
