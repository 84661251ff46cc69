package installer

import (
	"errors"
	"fmt"
	"github.com/stewardrt/steward/controller/ctlconf"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/stewardrt/steward/systemd"
	"golang.org/x/sys/unix"
)

// ControllerEnv locates the installed controller. None of it comes from the
// command line or the environment: the operator reaches these verbs
// through sudo and must not be able to point root at other files.
type ControllerEnv struct {
	// Account is the controller's OS account (systemd.ControllerUser).
	// Before the installer reads or writes any of the controller's own
	// files it becomes this account for good (setgroups, setresgid,
	// setresuid), so that whatever it writes is the controller's and no
	// path in the controller's config can make root write or read
	// elsewhere. "" means this process's own account, for tests that own
	// the controller's files themselves.
	Account string
	// Config is the installed controller config.
	Config string
	// Bundle, StateDir and Foreground are used when no config is installed:
	// where bundle-install puts the bundle, where the journal lives
	// (StateDir/journal), and the foreground socket.
	Bundle     string
	StateDir   string
	Foreground string
	// MCP and Reverse, with Foreground and StateDir, are the installed
	// layout that controller-config requires a config to name: the units
	// make these sockets and directory, and nothing else is writable to the
	// controller under ProtectSystem=strict.
	MCP     string
	Reverse string
}

// DefaultControllerEnv is the controller as package systemd installs it.
func DefaultControllerEnv() ControllerEnv {
	return ControllerEnv{
		Account:    systemd.ControllerUser,
		Config:     systemd.DefaultControllerConfig,
		Bundle:     systemd.DefaultControllerBundle,
		StateDir:   systemd.ControllerStateDir,
		Foreground: systemd.ForegroundSocketPath,
		MCP:        systemd.MCPSocketPath,
		Reverse:    systemd.ReverseSocketPath,
	}
}

// controllerIDs resolves the controller's account to uid and gid; ok is
// false when Account is "" (this process's own).
func (e ControllerEnv) controllerIDs() (uid, gid uint32, ok bool, err error) {
	if e.Account == "" {
		return 0, 0, false, nil
	}
	db, err := readAccountDB("/")
	if err != nil {
		return 0, 0, false, err
	}
	a, found := db.users[e.Account]
	if !found {
		return 0, 0, false, fmt.Errorf("account %s does not exist: run steward-installer install first", e.Account)
	}
	return a.uid, a.gid, true, nil
}

// becomeController switches this process, every thread of it, to the
// controller's account for the rest of its life. It is a no-op when
// Account is "" or the process already is that account.
func (e ControllerEnv) becomeController() error {
	uid, gid, ok, err := e.controllerIDs()
	if err != nil || !ok {
		return err
	}
	if uint32(os.Geteuid()) == uid && uint32(os.Getuid()) == uid {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("cannot become account %s (uid %d) as uid %d: run this verb as root", e.Account, uid, os.Geteuid())
	}
	// Go applies each of these to every thread of the process.
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("becoming %s: setgroups: %v", e.Account, err)
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return fmt.Errorf("becoming %s: setresgid %d: %v", e.Account, gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return fmt.Errorf("becoming %s: setresuid %d: %v", e.Account, uid, err)
	}
	return nil
}

// errNoConfig is wrapped when no controller config is installed.
var errNoConfig = errors.New("no controller config is installed")

// installedConfig is the controller config as installed, with its bytes.
type installedConfig struct {
	path string
	raw  []byte
	cfg  *ctlconf.Config
}

// readInstalledConfig reads and parses the installed config. The file must
// be a regular file (its last component is not followed if it is a link)
// owned by root or one of owners, at most ctlconf.MaxConfigBytes.
// A missing file wraps errNoConfig.
func readInstalledConfig(path string, owners ...uint32) (installedConfig, error) {
	raw, err := readOwnedFile(path, ctlconf.MaxConfigBytes, owners...)
	if errors.Is(err, os.ErrNotExist) {
		return installedConfig{}, fmt.Errorf("%s: %w", path, errNoConfig)
	}
	if err != nil {
		return installedConfig{}, err
	}
	cfg, err := ctlconf.Parse(raw)
	if err != nil {
		return installedConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return installedConfig{path: path, raw: raw, cfg: cfg}, nil
}

// readOwnedFile reads a file of the controller's that the installer trusts
// as long as root, this process or one of owners wrote it: opened without
// following a link in its last component, a regular file, at most limit
// bytes.
func readOwnedFile(path string, limit int64, owners ...uint32) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("%s: %w", path, ErrSymlink)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w: a %s", path, ErrNotRegular, fileType(st.Mode))
	}
	if st.Uid != 0 && st.Uid != uint32(os.Geteuid()) && !slices.Contains(owners, st.Uid) {
		return nil, fmt.Errorf("%s: %w: owned by uid %d", path, ErrOwner, st.Uid)
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size, limit)
	}
	return readAtMost(f, path, limit)
}
