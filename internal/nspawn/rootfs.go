package nspawn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// CacheDir holds the cached root file systems and the harness's locks: the
// one directory the harness keeps on the machine between runs.
const CacheDir = "/var/cache/steward-test"

// Packages are installed into the root on top of debootstrap's minbase:
// systemd as PID 1, D-Bus for systemctl, sudo for the operator's verbs,
// libpam-systemd for sessions, passwd for useradd.
var Packages = []string{"systemd", "systemd-sysv", "dbus", "sudo", "libpam-systemd", "passwd"}

// rootfsVersion changes whenever what Rootfs puts into the root changes, so
// that a cache made by an older harness is not used.
const rootfsVersion = "1"

// Hostname is the container's host name, which the root's /etc/hosts
// resolves (sudo looks it up).
const Hostname = "steward-test"

// buildLimit bounds a debootstrap run: 45-130 s are measured.
const buildLimit = 15 * time.Minute

// RootfsInfo says where the cached root is and whether this call built it.
type RootfsInfo struct {
	Dir   string
	Suite string
	// Built is true when this call ran debootstrap; Took is how long the
	// build (or, when the cache was there, the look-up) took.
	Built bool
	Took  time.Duration
}

// rootfsName is the cache entry's name for suite: it changes with the
// package list and the harness's version.
func rootfsName(suite string) string {
	h := sha256.Sum256([]byte(rootfsVersion + "\x00" + suite + "\x00" + strings.Join(Packages, ",")))
	return "rootfs-" + suite + "-" + hex.EncodeToString(h[:6])
}

// Rootfs returns the cached root file system of the running suite, building
// it first if it is not there (see the package documentation). It skips t
// (fails it under CI=true) when the machine cannot make one.
func Rootfs(t testing.TB) RootfsInfo {
	t.Helper()
	requireHost(t)
	start := time.Now()
	suite, err := Suite("/etc/os-release")
	if err != nil {
		unavailable(t, "cannot tell the running Debian suite: "+err.Error())
	}
	info := RootfsInfo{Dir: filepath.Join(CacheDir, rootfsName(suite)), Suite: suite}
	if isDir(info.Dir) {
		info.Took = time.Since(start)
		return info
	}
	deboot, err := lookTool("debootstrap")
	if err != nil {
		unavailable(t, "debootstrap is not installed (apt-get install debootstrap), and no root is cached in "+info.Dir)
	}
	mirror, err := Mirror("/etc/apt", suite)
	if err != nil {
		unavailable(t, "no Debian mirror to debootstrap from: "+err.Error())
	}
	if err := mirrorReachable(context.Background(), mirror, suite); err != nil {
		unavailable(t, "the Debian mirror apt uses is not reachable: "+err.Error())
	}
	built, err := buildRootfs(deboot, mirror, suite, info.Dir, t.Logf)
	if err != nil {
		t.Fatalf("building the container's root file system: %v", err)
	}
	info.Built, info.Took = built, time.Since(start)
	return info
}

// buildRootfs makes dir with debootstrap unless another process made it
// while this one waited for the build lock. It reports whether it built.
func buildRootfs(deboot, mirror, suite, dir string, logf func(string, ...any)) (bool, error) {
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return false, err
	}
	unlock, err := lockFile(filepath.Join(CacheDir, ".build.lock"), unix.LOCK_EX)
	if err != nil {
		return false, err
	}
	defer unlock()
	if isDir(dir) {
		return false, nil
	}
	// Under the lock nobody else builds: a directory left by a build that
	// crashed is garbage.
	stale, _ := filepath.Glob(dir + ".build-*")
	for _, s := range stale {
		logf("removing %s, left by a build that did not finish", s)
		if err := os.RemoveAll(s); err != nil {
			return false, err
		}
	}
	tmp, err := os.MkdirTemp(CacheDir, filepath.Base(dir)+".build-")
	if err != nil {
		return false, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	// The root directory of the container: MkdirTemp made it 0700.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	logf("debootstrap --variant=minbase %s from %s into %s", suite, mirror, tmp)
	ctx, cancel := context.WithTimeout(context.Background(), buildLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, deboot, "--variant=minbase", "--include="+strings.Join(Packages, ","), suite, tmp, mirror)
	cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, tail(out.String(), 40))
	}
	if err := customizeRoot(tmp); err != nil {
		return false, err
	}
	// Everything on disk before the name says the cache is complete.
	syscall.Sync()
	if err := os.Rename(tmp, dir); err != nil {
		return false, err
	}
	keep = true
	return true, syncDir(CacheDir)
}

// customizeRoot adds what the harness needs beyond debootstrap's root: the
// container's host name, resolvable (sudo resolves it and warns when it
// cannot).
func customizeRoot(root string) error {
	files := map[string]string{
		"etc/hostname": Hostname + "\n",
		"etc/hosts":    "127.0.0.1\tlocalhost\n127.0.1.1\t" + Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for rel, data := range files {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// lockFile takes a flock of kind on path (made if missing) and returns its
// release.
func lockFile(path string, kind int) (func(), error) {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(fh.Fd()), kind)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() { fh.Close() }, nil
}

func syncDir(dir string) error {
	fh, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer fh.Close()
	return fh.Sync()
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
