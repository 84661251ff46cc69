package testaccount

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
)

// Sweep removes every account and then every group under Prefix whose
// name parses as "stwt-<pid>-<start>-..." and whose creating process (that
// pid, started at that second) no longer runs: what a test binary killed
// before its cleanups ran left behind. An account or group created by a
// process that still runs, this one included, is never touched, so test
// binaries running at once do not sweep each other's. Create calls it once
// per process, before the first account; it reports the first removal that
// failed.
func Sweep() error {
	stale, err := staleNames("/etc/passwd")
	if err != nil {
		return err
	}
	for _, name := range stale {
		// --force: daemons a killed journey started may still run as it.
		if err := removeAccount(name, true); err != nil && !gone(name, false) {
			return fmt.Errorf("testaccount: removing stale test account %s: %v", name, err)
		}
	}
	// Groups left: those made with groupadd, and any user group userdel
	// left behind.
	stale, err = staleNames("/etc/group")
	if err != nil {
		return err
	}
	for _, name := range stale {
		if err := run("groupdel", name); err != nil && !gone(name, true) {
			return fmt.Errorf("testaccount: removing stale test group %s: %v", name, err)
		}
	}
	return nil
}

func sweepStale() error {
	sweepOnce.Do(func() { sweepErr = Sweep() })
	return sweepErr
}

// gone reports whether the account (or group) name no longer exists: then
// a failed removal only lost a race with another run's Sweep.
func gone(name string, group bool) bool {
	var err error
	if group {
		_, err = user.LookupGroup(name)
		return errors.As(err, new(user.UnknownGroupError))
	}
	_, err = user.Lookup(name)
	return errors.As(err, new(user.UnknownUserError))
}

// staleNames lists the names under Prefix in an account database file
// (name:...) whose creator has stopped running.
func staleNames(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("testaccount: %v", err)
	}
	var stale []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), ":")
		pid, start, ok := creator(name)
		if !ok {
			continue
		}
		alive, err := running(pid, start)
		if err != nil {
			return nil, err
		}
		if !alive {
			stale = append(stale, name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("testaccount: %s: %v", file, err)
	}
	return stale, nil
}

// creator parses the pid and start time out of a name made by this
// package.
func creator(name string) (pid int, start int64, ok bool) {
	rest, found := strings.CutPrefix(name, Prefix)
	f := strings.SplitN(rest, "-", 3)
	if !found || len(f) != 3 || f[2] == "" {
		return 0, 0, false
	}
	p, perr := strconv.ParseInt(f[0], 36, 32)
	s, serr := strconv.ParseInt(f[1], 36, 64)
	if perr != nil || serr != nil || p <= 0 || s <= 0 {
		return 0, 0, false
	}
	return int(p), s, true
}

// running reports whether process pid runs and started at second start (a
// pid the kernel has given to a later process does not count).
func running(pid int, start int64) (bool, error) {
	s, err := processStart(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s == start, nil
}

// processStart returns when process pid started, in Unix seconds: the
// boot time plus field 22 of /proc/PID/stat (clock ticks since boot, at
// USER_HZ, which is 100 on Linux). Both are fixed for the life of the
// process, so every reader computes the same second.
func processStart(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("testaccount: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("testaccount: /proc/%d/stat: too few fields", pid)
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22
	if err != nil {
		return 0, fmt.Errorf("testaccount: /proc/%d/stat: start time: %v", pid, err)
	}
	boot, err := bootTime()
	if err != nil {
		return 0, err
	}
	return boot + ticks/100, nil
}

// bootTime is the btime line of /proc/stat: when the machine booted, in
// Unix seconds.
var bootTime = sync.OnceValues(func() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("testaccount: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("testaccount: /proc/stat has no btime line")
})
