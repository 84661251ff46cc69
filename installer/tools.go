package installer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// toolDirs are the only places the installer, running as root, looks for
// the programs it runs: never $PATH, which the caller controls.
var toolDirs = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// findTool returns the path of a system program, or an error naming the
// package that provides it.
func findTool(name, pkg string) (string, error) {
	for _, d := range toolDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s (install package %s)", name, strings.Join(toolDirs, ":"), pkg)
}

// runTool runs a system program with a minimal environment and returns an
// error carrying its output when it fails.
func runTool(ctx context.Context, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=" + strings.Join(toolDirs, ":"), "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(path), strings.Join(args, " "), err, oneLine(out))
	}
	return nil
}

// oneLine folds a program's output into one line for an error message.
func oneLine(b []byte) string {
	return strings.Join(strings.Fields(string(bytes.TrimSpace(b))), " ")
}

// checkSudoers has visudo check the drop-in before it goes anywhere near
// /etc/sudoers.d: a broken drop-in would break sudo for everyone.
func checkSudoers(ctx context.Context, data []byte) error {
	visudo, err := findTool("visudo", "sudo")
	if err != nil {
		return fmt.Errorf("cannot check the sudoers drop-in, so it is not installed: %v", err)
	}
	f, err := os.CreateTemp("", "steward-sudoers.")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := runTool(ctx, visudo, "-c", "-q", "-f", f.Name()); err != nil {
		return fmt.Errorf("the sudoers drop-in does not pass visudo: %v", err)
	}
	return nil
}
