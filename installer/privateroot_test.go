package installer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testenv"
	"golang.org/x/sys/unix"
)

// The real-install tests install for real: accounts by systemd-sysusers
// and useradd, the sudoers drop-in, units under /etc/systemd/system, state
// under /var/lib, sockets' directories under /run. They do it in a child
// of the test binary that runs in its own mount namespace, where /etc is a
// private copy of the machine's and /var/lib and /run are empty tmpfs, so
// that nothing they do reaches the machine that runs them:
//
//   - the test (inPrivateRoot) re-executes the test binary for itself alone,
//     with unshare(CLONE_NEWNS) between fork and exec (SysProcAttr.
//     Unshareflags; Go then marks every mount MS_REC|MS_PRIVATE, so no mount
//     made inside propagates out). A re-exec, not unshare(2) on a locked
//     thread, because a mount namespace entered by one thread is not the
//     other threads' (nor the runtime's) until exec;
//   - the child's TestMain (enterPrivateRoot) refuses to go on unless it is
//     in a mount namespace other than its parent's with no shared mount;
//     then it mounts a tmpfs on a scratch directory, copies /etc into it,
//     binds the copy over /etc, mounts fresh tmpfs over /var/lib and /run
//     and checks that each of the three is now a tmpfs. Its TMPDIR is in
//     that tmpfs too. When the child ends, however it ends (SIGKILL
//     included), the namespace and its tmpfs go with it: nothing is written
//     to the machine's disk;
//   - the parent compares what it sees of steward on the machine (accounts,
//     the sudoers, unit, sysusers.d and tmpfiles.d directories, /var/lib and
//     /run: hostSteward) before the child, at each checkpoint the child
//     reaches once it has installed something (while a test that purges at
//     its end would otherwise show nothing), and after the child, and fails
//     on any difference.
//
// Inside, the installer's tools behave as on a machine that is not booted
// with systemd, whatever the host is: /run/systemd/system is absent, so
// status and uninstall never run systemctl, and systemctl would not reach
// the host's manager anyway (its sockets are in the host's /run).
// systemd-analyze verify runs offline (it only writes its own
// /run/systemd in the private /run); visudo checks the drop-in file it is
// given; sudo reads the private /etc (sudoers, passwd, shadow, PAM). A real
// systemd is the booted-container journey's (hostjourney).

// privateRootEnv marks the child that runs one real-install test inside a
// private mount namespace; its value is the scratch directory (made by the
// parent) that the child's tmpfs covers.
const privateRootEnv = "STEWARD_INSTALLER_TEST_PRIVATE_ROOT"

// The child reports each checkpoint on fd 3 and waits for the parent's
// answer on fd 4 (exec.Cmd.ExtraFiles).
const checkpointOut, checkpointIn = 3, 4

// checkpoint is what the child sends at a checkpoint: what it sees of
// steward inside its namespace.
type checkpoint struct {
	Label  string
	Inside []string
}

// inPrivateRoot reports whether the test runs in the private root; if it
// does not, it runs the test there instead, in a child, reports that run as
// its own result and returns false: the caller returns at once. The child
// must reach at least checkpoints calls of hostCheckpoint.
func inPrivateRoot(t *testing.T, checkpoints int) bool {
	t.Helper()
	if os.Getenv(privateRootEnv) != "" {
		return true // TestMain has entered and checked it
	}
	needRealInstallTools(t)
	needNoInstallation(t)
	before, err := hostSteward()
	if err != nil {
		t.Fatal(err)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	fromChild, childOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	childIn, toChild, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	cmd := exec.CommandContext(ctx, self, "-test.run=^"+t.Name()+"$", "-test.v=true", "-test.count=1")
	cmd.Env = append(os.Environ(), privateRootEnv+"="+scratch, "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	cmd.ExtraFiles = []*os.File{childOut, childIn} // fds 3 and 4
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Killed at the deadline, the child may leave a tool holding its
	// output open; the namespace ends with the last of them.
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Start()
	childOut.Close()
	childIn.Close()
	if err != nil {
		fromChild.Close()
		toChild.Close()
		// unshare(CLONE_NEWNS) needs CAP_SYS_ADMIN and a kernel with
		// mount namespaces: root outside a container that withholds them.
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) {
			testenv.Missing(t, "cannot run the real-install test in a private mount namespace: %v", err)
		}
		t.Fatal(err)
	}
	seen := make(chan int, 1)
	go func() { seen <- answerCheckpoints(t, before, fromChild, toChild) }()
	err = cmd.Wait()
	n := <-seen
	// Quoted, so that test2json takes the child's "--- PASS" lines for
	// log text, not for results of this process's tests.
	t.Logf("in a private mount namespace:\n| %s", strings.ReplaceAll(strings.TrimSuffix(out.String(), "\n"), "\n", "\n| "))
	switch {
	case err != nil:
		t.Errorf("the real-install test in its private mount namespace: %v", err)
	case !strings.Contains(out.String(), "\n--- PASS: "+t.Name()+" (") || strings.Contains(out.String(), "--- SKIP: "):
		t.Errorf("the real-install test in its private mount namespace did not pass")
	case n < checkpoints:
		t.Errorf("the child reached %d checkpoints, want %d", n, checkpoints)
	}

	after, err := hostSteward()
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLines(before, after); d != "" {
		t.Errorf("the real-install test changed steward's traces on this machine:\n%s", d)
	}
	return false
}

// answerCheckpoints is the parent's side of hostCheckpoint: at each
// checkpoint the child has installed something in its namespace; this
// machine must still show what it showed before the child started. It
// answers "ok" or the difference, and returns how many checkpoints came.
func answerCheckpoints(t *testing.T, before []string, fromChild, toChild *os.File) int {
	defer fromChild.Close()
	defer toChild.Close()
	n := 0
	dec := json.NewDecoder(fromChild)
	for {
		var cp checkpoint
		if err := dec.Decode(&cp); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("checkpoint from the child: %v", err)
			}
			return n
		}
		n++
		answer := "ok"
		outside, err := hostSteward()
		switch d := diffLines(before, outside); {
		case err != nil:
			answer = err.Error()
		case d != "":
			answer = "this machine changed: " + strings.ReplaceAll(d, "\n", "; ")
		case diffLines(before, cp.Inside) == "":
			answer = "nothing installed inside the namespace to tell apart"
		}
		if answer != "ok" {
			t.Errorf("checkpoint %q: %s", cp.Label, answer)
		} else {
			t.Logf("checkpoint %q: inside the namespace\n%s  this machine unchanged (%d entries, as before)", cp.Label, diffLines(before, cp.Inside), len(outside))
		}
		if _, err := fmt.Fprintln(toChild, answer); err != nil {
			t.Errorf("answering the child: %v", err)
			return n
		}
	}
}

var (
	checkpointMu  sync.Mutex
	checkpointOf  *os.File
	checkpointAns *bufio.Reader
)

// hostCheckpoint, in the child, has the parent check this machine while
// the test has installed something in its namespace (label says what),
// and fails the test on the parent's finding.
func hostCheckpoint(t *testing.T, label string) {
	t.Helper()
	checkpointMu.Lock()
	defer checkpointMu.Unlock()
	if checkpointOf == nil {
		checkpointOf = os.NewFile(checkpointOut, "checkpoint-out")
		checkpointAns = bufio.NewReader(os.NewFile(checkpointIn, "checkpoint-in"))
	}
	inside, err := hostSteward()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(checkpointOf).Encode(checkpoint{Label: label, Inside: inside}); err != nil {
		t.Fatalf("checkpoint %q: %v", label, err)
	}
	answer, err := checkpointAns.ReadString('\n')
	if err != nil || answer != "ok\n" {
		t.Fatalf("checkpoint %q: %q %v", label, answer, err)
	}
}

// enterPrivateRoot is the child's side: it makes sure it is in a mount
// namespace of its own from which no mount propagates, then gives itself a
// private /etc, /var/lib, /run and TMPDIR, all on a tmpfs mounted over
// scratch. Any failure leaves the machine as it was: the first write that
// could reach it (the copy of /etc) goes to the tmpfs.
func enterPrivateRoot(scratch string) error {
	own, err1 := os.Readlink("/proc/self/ns/mnt")
	parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	switch {
	case err1 != nil || err2 != nil:
		return fmt.Errorf("cannot tell the mount namespaces apart: %v %v", err1, err2)
	case own == parent:
		return fmt.Errorf("refused: still in the parent's mount namespace %s (the test must be run by its parent, under unshare)", own)
	}
	if err := noSharedMounts(); err != nil {
		return err
	}
	// The checkpoint pipes are this process's alone: no tool it runs may
	// hold them open (or write to them).
	for _, fd := range []int{checkpointOut, checkpointIn} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return fmt.Errorf("checkpoint fd %d: %v", fd, err)
		}
		unix.CloseOnExec(fd)
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %v", scratch, err)
	}
	if err := isTmpfs(scratch); err != nil {
		return err
	}
	etc := filepath.Join(scratch, "etc")
	if err := copyEtc(etc); err != nil {
		return err
	}
	if err := unix.Mount(etc, "/etc", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s over /etc: %v", etc, err)
	}
	for _, d := range []string{"/var/lib", "/run"} {
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %v", d, err)
		}
	}
	for _, d := range []string{"/etc", "/var/lib", "/run"} {
		if err := isTmpfs(d); err != nil {
			return err
		}
	}
	// Root's and not writable by others: the installer's bin-dir check
	// accepts the test's bin dir under it.
	tmp := filepath.Join(scratch, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	return os.Setenv("TMPDIR", tmp)
}

// copyEtc copies the machine's /etc to dst while holding the account
// database's lock (shadow's lckpwdf: a write lock on /etc/.pwd.lock, which
// useradd, userdel and groupadd take before they make their *.lock files
// and release after removing them). Other tests of the same `go test ./...`
// add and remove accounts at the same time; without the lock a copy may
// list a passwd.lock that is gone when it is read, and fail.
func copyEtc(dst string) error {
	if f, err := os.OpenFile("/etc/.pwd.lock", os.O_WRONLY, 0); err == nil {
		defer f.Close() // closing the file releases the lock
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLKW, &lk); err != nil {
			return fmt.Errorf("locking the account database (/etc/.pwd.lock): %v", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("opening the account database's lock: %v", err)
	}
	if out, err := exec.Command("/bin/cp", "-a", "/etc", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copying /etc: %v: %s", err, out)
	}
	return nil
}

// noSharedMounts refuses a mount table in which any mount is shared (a
// "shared:N" optional field of /proc/self/mountinfo): a mount made under
// it would appear on the machine too.
func noSharedMounts() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i := 6; i < len(fields) && fields[i] != "-"; i++ {
			if strings.HasPrefix(fields[i], "shared:") {
				return fmt.Errorf("refused: mount %s is shared with the parent's namespace (%s)", fields[4], fields[i])
			}
		}
	}
	return sc.Err()
}

func isTmpfs(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	if st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("refused: %s is not the private tmpfs (file system type %#x)", path, st.Type)
	}
	return nil
}
