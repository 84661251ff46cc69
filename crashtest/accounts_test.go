package crashtest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/notifytest"
	"github.com/stewardrt/steward/internal/testaccount"
	"golang.org/x/sys/unix"
)

// When the harness runs as root, each daemon runs under an account of its
// own (testaccount: stwt- names, removed when the test ends, even when it
// fails), as in an installation: its files are its own (0700), and each
// socket directory is setgid to the group of the daemon that connects to
// it (the application's to the host's, the host's forward to the
// controller's, the controller's reverse to the host's), so that the 0660
// sockets made there let exactly that peer in. The MCP clients are the
// test process (root), the controller's agent. Otherwise every daemon
// runs as the account running the test.

// daemonAccounts makes the three accounts when the test runs as root, and
// returns nil otherwise.
func daemonAccounts(t *testing.T) map[string]*testaccount.Account {
	if os.Geteuid() != 0 {
		t.Log("not root: the three daemons run as this account")
		return nil
	}
	out := map[string]*testaccount.Account{}
	for _, n := range daemonNames {
		a := testaccount.New(t, n)
		out[n] = &a
	}
	t.Logf("as root: the daemons run as %s (app), %s (host), %s (ctl)", out["app"].Name, out["host"].Name, out["ctl"].Name)
	return out
}

// commandDaemon is whose account runs each command.
var commandDaemon = map[string]string{"steward-appliance": "app", "steward-operator": "host", "steward-controller": "ctl"}

// procAttr is the process attributes a command of daemon runs with: its
// account's credentials when there are accounts, and death with the test.
func (s *stack) procAttr(daemon string) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if a := s.accounts[daemon]; a != nil {
		attr.Credential = &syscall.Credential{Uid: a.UID, Gid: a.GID}
	}
	return attr
}

// uid is the uid daemon runs as.
func (s *stack) uid(daemon string) int {
	if a := s.accounts[daemon]; a != nil {
		return int(a.UID)
	}
	return os.Getuid()
}

// ownDir makes a directory of daemon's (0700, its account's). With peer,
// it is a socket directory that peer connects into: setgid 2750 with
// peer's group, so that the sockets daemon makes there are that group's
// (searchable, not writable by the group: wire refuses a socket under a
// group-writable directory).
func (s *stack) ownDir(path, daemon, peer string) {
	s.t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		s.t.Fatal(err)
	}
	if s.accounts == nil {
		return
	}
	gid := s.accounts[daemon].GID
	mode := uint32(0o700)
	if peer != "" {
		gid, mode = s.accounts[peer].GID, 0o2750
	}
	if err := os.Chown(path, int(s.accounts[daemon].UID), int(gid)); err != nil {
		s.t.Fatal(err)
	}
	if err := unix.Chmod(path, mode); err != nil {
		s.t.Fatal(err)
	}
}

// give copies the file src to dst as daemon's (mode 0600, or 0644 for a
// public key): what an operator hands from one account to another.
func (s *stack) give(src, dst, daemon string, mode os.FileMode) {
	s.t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		s.t.Fatal(err)
	}
	s.writeAs(dst, b, daemon, mode)
}

// writeAs writes a new file at path as daemon's.
func (s *stack) writeAs(path string, b []byte, daemon string, mode os.FileMode) {
	s.t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		s.t.Fatal(err)
	}
	if a := s.accounts[daemon]; a != nil {
		if err := os.Chown(path, int(a.UID), int(a.GID)); err != nil {
			s.t.Fatal(err)
		}
	}
}

// openToDaemons lets the daemons' accounts reach the harness's directory
// (search only), and each send to its own NOTIFY_SOCKET, bound in a test
// temporary directory.
func (s *stack) openToDaemons(notify map[string]*notifytest.Socket) {
	s.t.Helper()
	if s.accounts == nil {
		return
	}
	if err := os.Chmod(s.dir, 0o711); err != nil {
		s.t.Fatal(err)
	}
	for daemon, n := range notify {
		// t.TempDir()'s directory and the test's directory above it.
		for _, d := range []string{filepath.Dir(n.Path), filepath.Dir(filepath.Dir(n.Path))} {
			if err := os.Chmod(d, 0o711); err != nil {
				s.t.Fatal(err)
			}
		}
		a := s.accounts[daemon]
		if err := os.Chown(n.Path, int(a.UID), int(a.GID)); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Chmod(n.Path, 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}
