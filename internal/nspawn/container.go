package nspawn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the container's life cycle. A boot to "running" takes under a
// second on this machine class; the bounds are for a loaded CI machine.
const (
	bootLimit     = 2 * time.Minute
	shutdownLimit = 90 * time.Second
	cgroupLimit   = 30 * time.Second
)

// rebootExit is systemd-nspawn's exit status when the container's PID 1
// rebooted.
const rebootExit = 133

// File is one file placed into the container before its first boot, owned
// by root. Its parent directories are made as the root file system has
// them (mode and owner), or root's 0755 where it has none.
type File struct {
	Path   string // absolute, inside the container
	Source string // a host file to copy; or
	Data   []byte // the content, when Source is ""
	Mode   os.FileMode
}

// Options are what Boot puts into the container.
type Options struct {
	Files []File
}

// Container is one booted systemd-nspawn container. Its methods are not
// safe for concurrent use.
type Container struct {
	// Name is the machine name (systemd-nspawn -M), unique on the host.
	Name   string
	Rootfs RootfsInfo

	t                    testing.TB
	dir                  string // the test's directory: upper, work, merged, logs
	upper, work, merged  string
	hs                   []hierarchy
	cg                   containerCgroups
	releaseRunning       func()
	cmd                  *exec.Cmd
	done                 chan struct{} // closed when nspawn has exited
	exitCode             int
	leader               int
	console              string // nspawn's output, all boots
	bootTimes            []time.Duration
	stopped, cleanupDone bool
}

// Boot boots a container on the cached root (Rootfs) with opts' files in
// place, and stops it and removes what it left on the host when t ends. It
// skips t (fails it under CI=true) when the machine cannot boot one.
func Boot(t testing.TB, opts Options) *Container {
	t.Helper()
	info := Rootfs(t)
	hs, err := hierarchies()
	if err != nil {
		unavailable(t, "systemd-nspawn needs a cgroup hierarchy: "+err.Error())
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Container{
		Name: machinePrefix + hex.EncodeToString(rnd[:]), Rootfs: info, t: t, dir: dir,
		upper: filepath.Join(dir, "upper"), work: filepath.Join(dir, "work"), merged: filepath.Join(dir, "merged"),
		console: filepath.Join(dir, "console.log"), hs: hs,
	}
	for _, d := range []string{c.upper, c.work, c.merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range opts.Files {
		if err := placeFile(info.Dir, c.upper, f); err != nil {
			t.Fatalf("placing %s into the container: %v", f.Path, err)
		}
	}
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Leftovers of a test process that died before its cleanup go first,
	// while no container runs.
	if err := tryExclusive(func() { c.logErr("sweeping stale cgroups", sweepStale(hs)) }); err != nil {
		t.Fatal(err)
	}
	release, err := lockFile(runningLock, unix.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	c.releaseRunning = release
	t.Cleanup(c.cleanup)
	if state, err := c.boot(); err != nil {
		t.Fatal(err)
	} else if state != "running" {
		t.Fatalf("the container booted to %q, not running:\n%s", state, c.failedUnits())
	}
	return c
}

// Leader is the host pid of the container's PID 1.
func (c *Container) Leader() int { return c.leader }

// BootTimes are how long each boot took, from starting nspawn to `systemctl
// is-system-running --wait` returning.
func (c *Container) BootTimes() []time.Duration { return c.bootTimes }

// HostPath is where path inside the running container is seen from the
// host (through its PID 1's root: the container's own mounts, /run
// included).
func (c *Container) HostPath(path string) string {
	return "/proc/" + strconv.Itoa(c.leader) + "/root" + path
}

// boot starts nspawn and blocks until the container's systemd is ready and
// its boot has finished; it returns `systemctl is-system-running`'s state.
func (c *Container) boot() (string, error) {
	start := time.Now()
	cg, err := makeCgroups(c.hs, c.Name)
	if err != nil {
		return "", err
	}
	c.cg = cg
	notify, err := listenNotify(filepath.Join(c.dir, "notify.sock"))
	if err != nil {
		return "", err
	}
	defer notify.close()
	console, err := os.OpenFile(c.console, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer console.Close()
	nspawn, err := lookTool("systemd-nspawn")
	if err != nil {
		return "", err
	}
	c.cmd = exec.Command("/bin/sh", append([]string{"-c", wrapperScript, "sh",
		c.Rootfs.Dir, c.upper, c.work, c.merged, nspawn}, c.nspawnArgs()...)...)
	c.cmd.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"NOTIFY_SOCKET=" + notify.path,
		"STEWARD_NSPAWN_CGROUPS=" + strings.Join(cg.dirs, ":"),
	}
	c.cmd.Stdout, c.cmd.Stderr = console, console
	// The overlay is mounted in a mount namespace of the wrapper's own: it
	// is never in the host's mount table and goes with the container.
	// SIGKILL when this process dies: nspawn's own death kills the
	// container.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return "", fmt.Errorf("starting systemd-nspawn: %w", err)
	}
	c.done, c.stopped = make(chan struct{}), false
	go func(cmd *exec.Cmd, done chan struct{}) {
		err := cmd.Wait()
		c.exitCode = cmd.ProcessState.ExitCode()
		if err != nil && c.exitCode < 0 {
			c.exitCode = -1
		}
		close(done)
	}(c.cmd, c.done)
	if err := c.awaitReady(notify); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootLimit)
	defer cancel()
	out, _, _ := c.Run(ctx, "", nil, "systemctl", "is-system-running", "--wait")
	c.bootTimes = append(c.bootTimes, time.Since(start))
	return strings.TrimSpace(string(out)), nil
}

// wrapperScript runs in a fresh mount namespace: it moves itself into the
// container's cgroups, mounts the overlay, and becomes systemd-nspawn.
// Arguments: LOWER UPPER WORK MERGED NSPAWN ARGS...
const wrapperScript = `set -eu
IFS=:
for cg in $STEWARD_NSPAWN_CGROUPS; do echo $$ > "$cg/cgroup.procs"; done
unset IFS
mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"
shift 4
exec "$@"`

func (c *Container) nspawnArgs() []string {
	return []string{
		"-D", c.merged, "-b", "-M", c.Name, "--hostname=" + Hostname,
		"--register=no", "--keep-unit", "--private-network", "--link-journal=no",
		"--resolv-conf=off", "--timezone=off", "--console=read-only",
		"--notify-ready=yes", "--setenv=SYSTEMD_LOG_SECCOMP=1",
	}
}

// awaitReady reads nspawn's notifications until READY=1, or fails when
// nspawn exits first or the bound passes.
func (c *Container) awaitReady(n *notifySocket) error {
	timer := time.NewTimer(bootLimit)
	defer timer.Stop()
	c.leader = 0
	for {
		select {
		case msg, ok := <-n.msgs:
			if !ok {
				return errNotifyClosed
			}
			leader, ready, err := parseNotify(msg)
			if err != nil {
				return err
			}
			if leader != 0 {
				c.leader = leader
			}
			if ready {
				if c.leader == 0 {
					return errors.New("systemd-nspawn said READY=1 without naming the container's PID 1")
				}
				return nil
			}
		case <-c.done:
			return fmt.Errorf("systemd-nspawn exited with status %d before the container was ready:\n%s", c.exitCode, c.consoleTail(30))
		case <-timer.C:
			return fmt.Errorf("the container was not ready within %v:\n%s", bootLimit, c.consoleTail(30))
		}
	}
}

// Reboot reboots the container: its systemd reboots, nspawn exits with
// status 133, and the harness boots it again on the same overlay. It
// returns the state the new boot reached (`systemctl is-system-running`).
func (c *Container) Reboot() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownLimit)
	defer cancel()
	// systemctl reboot returns once the job is queued, or dies with the
	// container: its status says nothing.
	c.Run(ctx, "", nil, "systemctl", "reboot")
	select {
	case <-c.done:
	case <-ctx.Done():
		return "", fmt.Errorf("the container did not reboot within %v:\n%s", shutdownLimit, c.consoleTail(30))
	}
	if c.exitCode != rebootExit {
		return "", fmt.Errorf("systemd-nspawn exited with status %d, not %d (reboot):\n%s", c.exitCode, rebootExit, c.consoleTail(30))
	}
	if err := c.cg.remove(cgroupLimit); err != nil {
		return "", err
	}
	return c.boot()
}

// Stop powers the container off (SIGTERM to nspawn, which asks its systemd
// to halt), or kills it when that takes longer than the bound. It waits for
// nspawn to exit.
func (c *Container) Stop() error {
	if c.cmd == nil || c.stopped {
		return nil
	}
	c.stopped = true
	select {
	case <-c.done:
		return nil
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(shutdownLimit):
	}
	c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("the container did not power off within %v; killed", shutdownLimit)
}

// cleanup stops the container and removes what it left on the host.
func (c *Container) cleanup() {
	if c.cleanupDone {
		return
	}
	c.cleanupDone = true
	c.logErr("stopping the container", c.Stop())
	if c.t.Failed() {
		c.t.Logf("the container's console, last lines:\n%s", c.consoleTail(60))
	}
	c.logErr("removing the container's cgroups", c.cg.remove(cgroupLimit))
	c.logErr("removing nspawn's files under "+nspawnRunDir, cleanNspawnRun(c.Name, false))
	c.releaseRunning()
	c.logErr("cleaning up after the last container", tryExclusive(func() {
		c.logErr("removing nspawn's directories", cleanNspawnRun(c.Name, true))
		c.logErr("sweeping stale cgroups", sweepStale(c.hs))
	}))
}

// logErr fails the test with what could not be cleaned up: a leftover on
// the host is a defect of the harness.
func (c *Container) logErr(what string, err error) {
	if err != nil {
		c.t.Errorf("%s: %v", what, err)
	}
}

func (c *Container) consoleTail(n int) string {
	raw, _ := os.ReadFile(c.console)
	return tail(string(raw), n)
}

// failedUnits lists the container's failed units, for a boot that did not
// reach "running".
func (c *Container) failedUnits() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut, _ := c.Run(ctx, "", nil, "systemctl", "--failed", "--no-legend", "--plain")
	return string(out) + string(errOut)
}

// Command is cmd run inside the container as account user ("" or "root":
// root) with its primary group and supplementary groups, a fresh
// environment (setpriv --reset-env: HOME, USER, SHELL and PATH of the
// account) and the container's root as its working directory.
func (c *Container) Command(ctx context.Context, user string, args ...string) (*exec.Cmd, error) {
	argv := []string{"--target", strconv.Itoa(c.leader), "--all", "--", "/usr/bin/setpriv", "--reset-env"}
	if user != "" && user != "root" {
		uid, gid, err := c.account(user)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--reuid="+uid, "--regid="+gid, "--init-groups")
	}
	argv = append(argv, "--")
	argv = append(argv, args...)
	nsenter, err := lookTool("nsenter")
	if err != nil {
		nsenter = "nsenter"
	}
	cmd := exec.CommandContext(ctx, nsenter, argv...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd, nil
}

// Run runs args inside the container as user with stdin (nil: empty) and
// returns what it wrote; err is non-nil when it did not exit 0.
func (c *Container) Run(ctx context.Context, user string, stdin io.Reader, args ...string) (stdout, stderr []byte, err error) {
	cmd, err := c.Command(ctx, user, args...)
	if err != nil {
		return nil, nil, err
	}
	var o, e bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// WaitSocket blocks until path inside the running container is a socket
// that accepts a connection (connecting as root from the host). Its
// directory must exist.
func (c *Container) WaitSocket(path string, limit time.Duration) error {
	return waitSocket(c.HostPath(path), limit)
}

// WaitExit blocks until the process with pid pid inside the container has
// exited. A pid that is no longer there has exited.
func (c *Container) WaitExit(pid int, limit time.Duration) error {
	hp, err := hostPID(c.leader, pid)
	if errors.Is(err, errNoSuchProcess) {
		return nil
	}
	if err != nil {
		return err
	}
	return waitExit(hp, limit)
}

// account looks user up in the container's /etc/passwd: its uid and
// primary gid.
func (c *Container) account(user string) (uid, gid string, err error) {
	raw, err := os.ReadFile(c.HostPath("/etc/passwd"))
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 4 && f[0] == user {
			return f[2], f[3], nil
		}
	}
	return "", "", fmt.Errorf("no account %s in the container's /etc/passwd", user)
}
