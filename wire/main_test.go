package wire

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/testaccount"
	"golang.org/x/sys/unix"
)

// childEnv selects a child role when the test binary is re-executed.
const childEnv = "WIRE_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	code := m.Run()
	if childDir != "" {
		os.RemoveAll(childDir)
	}
	os.Exit(code)
}

// testAccount returns the uid and gid of a second OS account made for t
// and removed when it ends. Without root it skips t (fails it under
// CI=true). The package imports nothing of steward's; its tests use the
// shared, standard-library-only test helper so that every package's test
// accounts follow one naming and clean-up rule.
func testAccount(t *testing.T) (uid, gid uint32) {
	t.Helper()
	return testaccount.Peer(t)
}

var (
	childOnce sync.Once
	childDir  string // a 0755 directory holding a copy of the test binary
	childBin  string
	childErr  error
)

// childBinary returns a copy of the test binary that another account can
// execute (go test builds in a 0700 directory).
func childBinary(t *testing.T) string {
	t.Helper()
	childOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			childErr = err
			return
		}
		if childDir, err = os.MkdirTemp("", "wire-child-"); err != nil {
			childErr = err
			return
		}
		if err = os.Chmod(childDir, 0o755); err != nil {
			childErr = err
			return
		}
		childBin = filepath.Join(childDir, "wire.test")
		childErr = copyFile(self, childBin, 0o755)
	})
	if childErr != nil {
		t.Fatal(childErr)
	}
	return childBin
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// childCommand re-executes the test binary as uid/gid in role with env.
func childCommand(t *testing.T, role string, uid, gid uint32, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(childBinary(t), "-test.run=^$")
	cmd.Env = append([]string{childEnv + "=" + role, "PATH=/usr/bin:/bin"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	cmd.Stderr = os.Stderr
	return cmd
}

// publicDir makes a world-traversable directory for sockets shared with the
// second account (t.TempDir is 0700).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wire-pub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// socketPair returns two connected AF_UNIX stream sockets.
func socketPair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func mustKey(t testing.TB) *SigningKey {
	t.Helper()
	k, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
