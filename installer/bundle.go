package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/stewardrt/steward/internal/durable"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/wire/msg"
	"golang.org/x/sys/unix"
)

// bundleMode is the installed bundle's mode: the controller alone reads it.
const bundleMode = 0o600

// runBundleInstall installs the operator's signed host bundle as the
// controller's bundle file. It verifies the bundle (msg.OpenBundle: the
// signature of the bundle and of every route record in it), checks it was
// built for the installed controller, becomes the controller account,
// requires the bundle's host key and host uid to be the ones root pinned
// (controller-pin-host; the operator cannot choose whom the controller
// trusts) and replaces the file atomically. The same bytes already in place change
// nothing. The controller reads the bundle when it next starts.
func runBundleInstall(ctx context.Context, c *call, o options) int {
	owner, err := c.env.InvokingUID()
	if err != nil {
		return c.refusef("%v", err)
	}
	raw, b, routes, files, exit, ok := c.openBundleFor(o.operand, owner)
	if !ok {
		return exit
	}
	if exit, ok := c.checkHostPin(o.operand, b); !ok {
		return exit
	}
	changed, err := replaceFile(files.bundle, raw, bundleMode)
	if err != nil {
		return c.failf("%v", err)
	}
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.Route
	}
	state := "installed"
	if !changed {
		state = "unchanged"
	}
	fmt.Fprintf(c.stdout, "bundle-install: %s %s: controller %s, host uid %d, %d route(s) [%s]; the controller reads it when it next starts\n",
		state, files.bundle, b.Controller, b.HostUID, len(routes), strings.Join(names, " "))
	return ExitOK
}

// replaceFile makes path hold exactly data with mode, owned by this
// process's account: unchanged (false) when it already does; otherwise
// through a temporary file beside it, written, fsync'd, renamed over path,
// and the directory fsync'd, so a crash leaves the old file or the new one.
func replaceFile(path string, data []byte, mode uint32) (bool, error) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o7777 == mode && st.Uid == uint32(os.Geteuid()):
		have, rerr := readOwnedFile(path, int64(len(data))+1)
		if rerr == nil && bytes.Equal(have, data) {
			return false, nil
		}
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return false, fmt.Errorf("%s: a directory is in the way", path)
	case err != nil && !errors.Is(err, unix.ENOENT):
		return false, fmt.Errorf("%s: %v", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return false, fmt.Errorf("%s: %v", path, err)
	}
	tmp := f.Name()
	fail := func(err error) (bool, error) {
		f.Close()
		os.Remove(tmp)
		return false, fmt.Errorf("%s: %v", path, err)
	}
	if err := f.Chmod(fs.FileMode(mode)); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("%s: %v", path, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return true, fmt.Errorf("%s: %v", path, err)
	}
	return true, nil
}

// openBundleFor reads the operator's (or root's) bundle file as owner's
// private file and verifies it (msg.OpenBundle), then becomes the
// controller's account for good and refuses a bundle built for another
// controller than the installed config names. ok is false when it has
// answered (exit is the status).
func (c *call) openBundleFor(path string, owner uint32) (raw []byte, b msg.Bundle, routes []msg.RouteRecord, files controllerFiles, exit int, ok bool) {
	raw, err := ReadPrivateFile(path, owner, ctlconf.MaxBundleBytes)
	if err != nil {
		return nil, b, nil, files, c.refusef("%v", err), false
	}
	b, _, routes, err = msg.OpenBundle(raw)
	if err != nil {
		return nil, b, nil, files, c.refusef("%s: not a well-formed signed bundle: %v", path, err), false
	}
	if err := c.env.Controller.becomeController(); err != nil {
		return nil, b, nil, files, c.failf("%v", err), false
	}
	files, err = c.env.Controller.locateController(false)
	if err != nil {
		return nil, b, nil, files, c.failf("%v", err), false
	}
	if files.config != nil && b.Controller != files.config.cfg.Name {
		return nil, b, nil, files, c.refusef("%s: the bundle was built for controller %q, but the installed config %s is controller %q",
			path, b.Controller, files.config.path, files.config.cfg.Name), false
	}
	return raw, b, routes, files, 0, true
}
