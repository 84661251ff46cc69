package nspawn

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBoot boots the container, reads `systemctl is-system-running`, shows
// that a file placed before the boot and one written inside survive a
// reboot, that the kernel log shows a seccomp denial a service makes inside,
// and that the cleanup leaves nothing on the host: no cgroup, no mount, no
// file of nspawn's for the machine.
func TestBoot(t *testing.T) {
	klog := WatchKernelLog(t)
	c := Boot(t, Options{Files: []File{
		{Path: "/usr/local/bin/steward-hello", Data: []byte("#!/bin/sh\necho hello from \"$(id -un)\"\n"), Mode: 0o755},
	}})
	t.Logf("root %s (built: %v, %v); boot %v", c.Rootfs.Dir, c.Rootfs.Built, c.Rootfs.Took.Round(time.Millisecond), c.BootTimes()[0].Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	run := func(user string, args ...string) string {
		t.Helper()
		out, errOut, err := c.Run(ctx, user, nil, args...)
		if err != nil {
			t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("", "systemctl", "is-system-running"); got != "running" {
		t.Fatalf("systemctl is-system-running = %q", got)
	}
	if got := run("", "steward-hello"); got != "hello from root" {
		t.Fatalf("the placed file: %q", got)
	}
	if got := run("nobody", "steward-hello"); got != "hello from nobody" {
		t.Fatalf("as nobody: %q", got)
	}
	// The host's own mount table never shows the overlay.
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(mounts, []byte(c.merged)) {
		t.Fatalf("the overlay %s is in the host's mount table", c.merged)
	}
	for _, d := range c.cg.dirs {
		if !isDir(filepath.Join(d, "payload")) {
			t.Fatalf("nspawn did not make its payload cgroup under %s", d)
		}
	}

	// A denied system call is logged to the kernel log.
	out, errOut, _ := c.Run(ctx, "", nil, "systemd-run", "--wait", "--quiet", "-p", "SystemCallFilter=~@clock",
		"-p", "SystemCallErrorNumber=EPERM", "date", "-s", "2001-01-01")
	lines, err := klog.WaitFor(func(l string) bool { return strings.Contains(l, `comm="date"`) }, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	denials := SeccompLines(lines)
	if !strings.Contains(strings.Join(denials, "\n"), `comm="date"`) {
		t.Fatalf("no seccomp denial of date in the kernel log %q\n(systemd-run: %s%s)", denials, out, errOut)
	}

	run("", "sh", "-c", "echo kept > /var/lib/steward-reboot-test")
	before := c.Leader()
	state, err := c.Reboot()
	if err != nil {
		t.Fatal(err)
	}
	if state != "running" || c.Leader() == before {
		t.Fatalf("after the reboot: state %q, PID 1 %d (before %d)", state, c.Leader(), before)
	}
	if got := run("", "cat", "/var/lib/steward-reboot-test"); got != "kept" {
		t.Fatalf("after the reboot the file holds %q", got)
	}
	t.Logf("reboot to running: %v", c.BootTimes()[1].Round(time.Millisecond))

	c.cleanup()
	if t.Failed() {
		return
	}
	for _, d := range c.cg.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s is left: %v", d, err)
		}
	}
	for _, sub := range []string{"propagate", "unix-export"} {
		p := filepath.Join(nspawnRunDir, sub, c.Name)
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(c.Leader())); !os.IsNotExist(err) {
		t.Errorf("the container's PID 1 (%d) still runs", c.Leader())
	}
}
