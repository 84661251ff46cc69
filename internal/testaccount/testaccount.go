// Package testaccount creates the OS accounts that tests run as on the
// machine itself, under names no installation and no other test run uses,
// and removes them.
//
// Every name is
//
//	stwt-<pid>-<start>-<n>-<role>
//
// Prefix, then the process that created it (its pid and its start time in
// Unix seconds, both base 36), a sequence number within that process and
// the role the test gives it: at most 32 characters, useradd's limit. Two
// test binaries running at once therefore never share an account, and the
// installer's own accounts (steward-operator, steward-controller,
// steward-agents) are never made here: only the real-install tests use
// those, inside a private mount namespace (package installer).
//
// A test's account is removed by t.Cleanup (New, Peer), a journey's by its
// deferred cleanup, even when the test fails or panics in its own
// goroutine. What a process that dies without running its cleanups leaves
// behind (SIGKILL, a `go test -timeout` panic, a panic on another
// goroutine, a machine reset) stays until the next run that creates an
// account: it first calls Sweep, which removes every account and group
// under Prefix whose creating process is no longer running. Names under
// Prefix that do not parse as above are not ours to judge and are left
// alone.
package testaccount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// Prefix begins the name of every account and group this package makes.
const Prefix = "stwt-"

// MaxName is the longest account or group name useradd and groupadd accept
// (shadow's limit, the size of utmp's user field: on Debian 12 a name of 33
// characters is "invalid user name").
const MaxName = 32

// Account is an OS account a test created.
type Account struct {
	Name     string
	UID, GID uint32
}

var (
	seq       atomic.Uint64
	sweepOnce sync.Once
	sweepErr  error
)

// runPrefix is Prefix and this process's identity: "stwt-<pid>-<start>-".
var runPrefix = sync.OnceValues(func() (string, error) {
	start, err := processStart(os.Getpid())
	if err != nil {
		return "", fmt.Errorf("testaccount: this process's start time: %v", err)
	}
	return Prefix + strconv.FormatInt(int64(os.Getpid()), 36) + "-" + strconv.FormatInt(start, 36) + "-", nil
})

// NextStem returns a fresh name stem of this process, "stwt-<pid>-<start>-<n>-":
// the names a test or a journey gives its accounts begin with it.
func NextStem() (string, error) {
	p, err := runPrefix()
	if err != nil {
		return "", err
	}
	return p + strconv.FormatUint(seq.Add(1)-1, 36) + "-", nil
}

// ours refuses a name this process may not create: only names under its own
// run prefix, within MaxName, so that nothing here can make or remove an
// account a person or an installation uses.
func ours(name string) error {
	p, err := runPrefix()
	if err != nil {
		return err
	}
	switch {
	case !strings.HasPrefix(name, p) || len(name) == len(p):
		return fmt.Errorf("testaccount: refused %q: a test account's name begins with this run's prefix %s", name, p)
	case len(name) > MaxName:
		return fmt.Errorf("testaccount: refused %q: %d characters, useradd takes at most %d", name, len(name), MaxName)
	}
	return nil
}

// Create makes the system account name (its own group, no home, no login
// shell), a member of the supplementary groups given, and returns it. The
// name must begin with a stem of this process (NextStem) and the account
// must not exist yet. The caller removes it (Remove). The first creation of
// a process sweeps stale test accounts first (Sweep).
func Create(name string, groups ...string) (Account, error) {
	if err := ours(name); err != nil {
		return Account{}, err
	}
	if err := sweepStale(); err != nil {
		return Account{}, err
	}
	args := []string{"--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"}
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	if err := run("useradd", append(args, name)...); err != nil {
		return Account{}, err
	}
	u, err := user.Lookup(name)
	if err != nil {
		return Account{}, fmt.Errorf("testaccount: after useradd %s: %v", name, err)
	}
	uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
	gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(uerr, gerr); err != nil {
		return Account{}, fmt.Errorf("testaccount: account %s: %v", name, err)
	}
	return Account{Name: name, UID: uint32(uid), GID: uint32(gid)}, nil
}

// CreateGroup makes the system group name (under this process's stem, as
// for Create) and returns its gid. The caller removes it (RemoveGroup).
func CreateGroup(name string) (uint32, error) {
	if err := ours(name); err != nil {
		return 0, err
	}
	if err := sweepStale(); err != nil {
		return 0, err
	}
	if err := run("groupadd", "--system", name); err != nil {
		return 0, err
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("testaccount: after groupadd %s: %v", name, err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("testaccount: group %s: %v", name, err)
	}
	return uint32(gid), nil
}

// Remove deletes the account name and its own group. With force it does
// so even while a process still runs as the account (a journey's daemons
// are stopped only after its cleanup runs); without, that is an error.
func Remove(name string, force bool) error {
	if err := ours(name); err != nil {
		return err
	}
	return removeAccount(name, force)
}

// RemoveGroup deletes the group name.
func RemoveGroup(name string) error {
	if err := ours(name); err != nil {
		return err
	}
	return run("groupdel", name)
}

// removeAccount deletes an account and, where userdel left it (no
// USERGROUPS_ENAB), the group of the same name.
func removeAccount(name string, force bool) error {
	args := []string{name}
	if force {
		args = []string{"--force", name}
	}
	if err := run("userdel", args...); err != nil {
		return err
	}
	if _, err := user.LookupGroup(name); err == nil {
		return run("groupdel", name)
	}
	return nil
}

// New creates an account for t under a fresh stem, named after role, in
// the supplementary groups given, and removes it when t ends (t.Cleanup,
// which also runs when t fails or panics). Without root it skips t, or
// fails it under CI=true.
func New(t testing.TB, role string, groups ...string) Account {
	t.Helper()
	testenv.NeedRoot(t, "to create and run as a second OS account")
	for _, tool := range []string{"useradd", "userdel", "groupdel"} {
		if _, err := findTool(tool); err != nil {
			testenv.Missing(t, "%v", err)
		}
	}
	stem, err := NextStem()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(stem+role, groups...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Remove(a.Name, false); err != nil {
			t.Errorf("removing the test account: %v", err)
		}
	})
	return a
}

// Peer returns the uid and gid of a second account for the two-account
// tests, made for t alone and removed when it ends (see New).
func Peer(t testing.TB) (uid, gid uint32) {
	t.Helper()
	a := New(t, "peer")
	return a.UID, a.GID
}

// run runs a passwd tool, found in the system directories only, and
// returns its output in the error when it fails.
func run(tool string, args ...string) error {
	path, err := findTool(tool)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testaccount: %s %s: %v: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func findTool(name string) (string, error) {
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := d + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("testaccount: %s not found in /usr/sbin, /usr/bin, /sbin or /bin (install package passwd)", name)
}
