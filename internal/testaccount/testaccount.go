// Package testaccount gives tests the second OS account of the
// two-account tests: steward-test-peer, a system account with no home and
// no login shell, created with useradd the first time it is needed. Tests
// that need it skip, saying why, when not run as root.
package testaccount

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"testing"
)

// Name is the second account of the two-account tests.
const Name = "steward-test-peer"

var (
	once     sync.Once
	uid, gid uint32
	err      error
)

// Peer returns the uid and gid of the test peer account, creating it if
// needed. Without root it skips the test.
func Peer(t testing.TB) (uint32, uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create and run as a second OS account (" + Name + ")")
	}
	once.Do(func() {
		if _, lerr := user.Lookup(Name); lerr != nil {
			out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", Name).CombinedOutput()
			// Another test binary may have created it meanwhile.
			if _, lerr := user.Lookup(Name); aerr != nil && lerr != nil {
				err = fmt.Errorf("useradd %s: %v: %s", Name, aerr, out)
				return
			}
		}
		u, lerr := user.Lookup(Name)
		if lerr != nil {
			err = lerr
			return
		}
		u64, _ := strconv.ParseUint(u.Uid, 10, 32)
		g64, _ := strconv.ParseUint(u.Gid, 10, 32)
		uid, gid = uint32(u64), uint32(g64)
	})
	if err != nil {
		t.Fatal(err)
	}
	return uid, gid
}
