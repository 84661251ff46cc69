package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/stewardrt/steward/controller"
)

// maxSunPath is the longest socket path a Unix socket address can hold on
// Linux (sun_path is 108 bytes including the terminating NUL).
const maxSunPath = 107

// bindOverhead is what package wire adds to a listening socket's directory
// while it binds: DIR/.bind-NNNNNNNNNN/s (os.MkdirTemp's random part is at
// most 10 digits). The longest socket name, "/route-appliance.sock", is
// longer, so a directory that fits every socket path leaves room to bind
// (TestSocketNamesCoverBindOverhead).
const bindOverhead = len("/.bind-4294967295/s")

// tmpRoot holds the sockets' directory when XDG_RUNTIME_DIR is not set:
// /tmp itself, not $TMPDIR, which may be as long as a home directory.
// Tests point it at a directory of their own.
var tmpRoot = "/tmp"

// socketDirFor chooses the sockets' directory of a stack whose state is
// the absolute path state, as a first start does: in $XDG_RUNTIME_DIR
// (private to the user, short, emptied at logout), else in tmpRoot named by
// the UID. The default state's is "steward-dev" ("steward-dev-UID" in
// tmpRoot); any other state's adds 12 hex digits of the SHA-256 of its path,
// so that stacks of different states never share a directory and each
// removes its own when it stops.
func socketDirFor(state string) string {
	name := "steward-dev"
	base := os.Getenv("XDG_RUNTIME_DIR")
	if !filepath.IsAbs(base) {
		base = tmpRoot
		name += "-" + strconv.Itoa(os.Getuid())
	}
	def, err := DefaultStateDir()
	if err != nil || def != state {
		sum := sha256.Sum256([]byte(state))
		name += "-" + hex.EncodeToString(sum[:6])
	}
	return filepath.Join(base, name)
}

// recordedSocketDir returns the sockets' directory that an earlier start
// of this state recorded in the controller's config, or "" on a first
// start. The socket paths are fixed from then on: the route record the
// host signed names them and the controller's journal is bound to its
// config, so a later start with another XDG_RUNTIME_DIR keeps them.
func recordedSocketDir(l Layout) (string, error) {
	raw, err := os.ReadFile(l.Config)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	cfg, err := controller.ParseConfig(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", l.Config, err)
	}
	return filepath.Dir(cfg.Sockets.MCP), nil
}

// ensureSocketDir creates the sockets' directory (0700) if it is absent and
// refuses one that is a symbolic link, not a directory, owned by another
// UID or reachable by group or others, or so long that a socket path in it
// does not fit a socket address. It reports whether it created the
// directory.
func (l Layout) ensureSocketDir() (created bool, err error) {
	for _, s := range l.sockets() {
		if len(s) > maxSunPath {
			return false, fmt.Errorf("socket path %s: %d bytes exceeds the sun_path bound of %d; set XDG_RUNTIME_DIR to a shorter directory", s, len(s), maxSunPath)
		}
	}
	switch err := os.Mkdir(l.Run, 0o700); {
	case err == nil:
		created = true
		// Mkdir's mode is filtered by the umask; the check below wants 0700.
		if err := os.Chmod(l.Run, 0o700); err != nil {
			return created, fmt.Errorf("socket directory %s: %w", l.Run, err)
		}
	case !errors.Is(err, fs.ErrExist):
		return false, fmt.Errorf("socket directory %s: %w", l.Run, err)
	}
	return created, checkPrivateDir(l.Run)
}

// checkPrivateDir refuses a directory that is a symbolic link, not a
// directory, owned by another UID or whose mode is not 0700: in a shared
// /tmp another account may have made it first, to read or replace the
// sockets.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	uid := os.Getuid()
	switch owner, ok := ownerOf(fi); {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("socket directory %s is a symbolic link: refused, it must be a directory of uid %d with mode 0700", dir, uid)
	case !fi.IsDir():
		return fmt.Errorf("socket directory %s is not a directory", dir)
	case !ok || owner != uint32(uid):
		return fmt.Errorf("socket directory %s is owned by uid %d, not by uid %d: refused (remove it, or set XDG_RUNTIME_DIR)", dir, owner, uid)
	case fi.Mode().Perm() != 0o700:
		return fmt.Errorf("socket directory %s has mode %04o: refused, want 0700", dir, fi.Mode().Perm())
	}
	return nil
}

// sockets lists every socket of the stack.
func (l Layout) sockets() []string {
	s := []string{l.ApplianceSocket, l.ForwardSocket, l.ControlSocket, l.ReverseSocket, l.MCPSocket, l.ForegroundSocket, l.AdminSocket}
	if l.MCPHTTPSocket != "" {
		s = append(s, l.MCPHTTPSocket) // "/mcp-http.sock" is shorter than "/route-appliance.sock"
	}
	return s
}

// removeSocketDir removes the sockets' directory after a clean shutdown,
// first reporting a socket a daemon left behind.
func (l Layout) removeSocketDir() error {
	var left []error
	for _, s := range l.sockets() {
		if _, err := os.Lstat(s); err == nil {
			left = append(left, fmt.Errorf("steward-dev: socket %s left after shutdown", s))
		}
	}
	if len(left) > 0 {
		return errors.Join(left...)
	}
	if err := os.Remove(l.Run); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("steward-dev: remove the socket directory: %w", err)
	}
	return nil
}
