package nspawn

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// unavailable skips t with the reason, or fails it when CI=true: CI must run
// what the machine is expected to provide.
func unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", reason)
	}
	t.Skip(reason)
}

// requireHost checks what every container needs from the machine: root, a
// systemd-nspawn, nsenter and overlayfs.
func requireHost(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "booting a container needs root (CI runs as root)")
	}
	for _, tool := range []string{"systemd-nspawn", "nsenter"} {
		if _, err := lookTool(tool); err != nil {
			unavailable(t, tool+" is not installed (apt-get install systemd-container): "+err.Error())
		}
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		unavailable(t, "cannot tell whether the kernel has overlayfs: "+err.Error())
	}
	if !containsField(string(fs), "overlay") {
		unavailable(t, "the kernel has no overlayfs (not in /proc/filesystems)")
	}
}

// lookTool finds a tool on PATH or in the sbin directories, which a root
// shell has on PATH but a test's environment may not.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var firstErr error
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p, err := exec.LookPath(dir + "/" + name)
		if err == nil {
			return p, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return "", firstErr
}

// containsField reports whether any whitespace-separated field of text is
// word.
func containsField(text, word string) bool {
	return slices.Contains(strings.Fields(text), word)
}
