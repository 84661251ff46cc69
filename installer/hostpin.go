package installer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/stewardrt/steward/wire/msg"
)

// HostPinFile is the host pin's name in the controller's state directory
// (ControllerEnv.StateDir): the host key and host uid root decided the
// controller trusts. controller-pin-host writes it, as the controller's
// account, mode 0600; bundle-install installs only a bundle that matches it.
const HostPinFile = "host-pin.json"

// hostPinLimit bounds the pin file: one small JSON object.
const hostPinLimit = 4096

// hostPinMode is the pin's mode: the controller's own file, like its bundle.
const hostPinMode = 0o600

// hostPin is what root pins of the host: the SHA-256 of the host's public
// key as the bundle carries it (msg.Bundle.HostKey, the COSE_KeySet bytes)
// and the host's account. A bundle carries the key it is verified with, so
// whoever installs a bundle chooses whom the controller trusts; the pin
// makes that choice root's.
type hostPin struct {
	HostKeySha256 string `json:"hostKeySha256"` // 64 lowercase hex digits
	HostUID       uint32 `json:"hostUid"`
}

// pinOf is the pin a bundle would need.
func pinOf(b msg.Bundle) hostPin {
	h := sha256.Sum256(b.HostKey)
	return hostPin{HostKeySha256: hex.EncodeToString(h[:]), HostUID: b.HostUID}
}

// differences names, in one line, what of have differs from the pinned p;
// "" when nothing does.
func (p hostPin) differences(have hostPin) string {
	var d []string
	if have.HostKeySha256 != p.HostKeySha256 {
		d = append(d, fmt.Sprintf("host key sha256 %s is not the pinned %s", have.HostKeySha256, p.HostKeySha256))
	}
	if have.HostUID != p.HostUID {
		d = append(d, fmt.Sprintf("host uid %d is not the pinned %d", have.HostUID, p.HostUID))
	}
	return strings.Join(d, "; ")
}

// hostPinPath is where the pin is: a fixed path, not one the controller's
// config names.
func (e ControllerEnv) hostPinPath() string { return filepath.Join(e.StateDir, HostPinFile) }

// readHostPin reads and strictly parses the pin (readOwnedFile: no link
// followed, root's or this account's). A missing pin wraps os.ErrNotExist.
func readHostPin(path string) (hostPin, error) {
	raw, err := readOwnedFile(path, hostPinLimit)
	if err != nil {
		return hostPin{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p hostPin
	if err := dec.Decode(&p); err != nil {
		return hostPin{}, fmt.Errorf("%s: %v", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return hostPin{}, fmt.Errorf("%s: data after the pin object", path)
	}
	if !isHash(p.HostKeySha256) {
		return hostPin{}, fmt.Errorf("%s: hostKeySha256 %q is not 64 lowercase hex digits", path, p.HostKeySha256)
	}
	return p, nil
}

// runControllerPinHost pins the host of BUNDLE for the controller: root
// only (no sudo column). It reads BUNDLE as a private file of root (or of
// SUDO_UID when root ran it through sudo), verifies it (msg.OpenBundle),
// refuses one built for another controller than the installed config
// names, becomes the controller's account and writes the pin atomically.
// Run again with another host's bundle it replaces the pin (rotation) and
// says what it replaced. It installs no bundle: bundle-install does, once
// the bundle matches the pin.
func runControllerPinHost(ctx context.Context, c *call, o options) int {
	owner, exit, ok := c.rootInput()
	if !ok {
		return exit
	}
	_, b, _, _, exit, ok := c.openBundleFor(o.operand, owner)
	if !ok {
		return exit
	}
	path := c.env.Controller.hostPinPath()
	pin := pinOf(b)
	was := "none"
	switch old, err := readHostPin(path); {
	case err == nil:
		was = fmt.Sprintf("host key sha256 %s, host uid %d", old.HostKeySha256, old.HostUID)
	case errors.Is(err, os.ErrNotExist):
	default:
		// Root is pinning: the unreadable pin is replaced, and said so.
		was = "unreadable (" + err.Error() + ")"
	}
	data, err := json.Marshal(pin)
	if err != nil {
		return c.failf("%v", err)
	}
	changed, err := replaceFile(path, append(data, '\n'), hostPinMode)
	if err != nil {
		return c.failf("%v", err)
	}
	if !changed {
		fmt.Fprintf(c.stdout, "controller-pin-host: unchanged %s: host key sha256 %s, host uid %d\n", path, pin.HostKeySha256, pin.HostUID)
		return ExitOK
	}
	fmt.Fprintf(c.stdout, "controller-pin-host: pinned %s: host key sha256 %s, host uid %d (was: %s); bundle-install now installs only bundles of this host\n",
		path, pin.HostKeySha256, pin.HostUID, was)
	return ExitOK
}

// checkHostPin refuses a bundle whose host differs from the pinned one,
// naming what differs; a missing pin blocks every install (exit 1): only
// root decides whom the controller trusts.
func (c *call) checkHostPin(operand string, b msg.Bundle) (int, bool) {
	path := c.env.Controller.hostPinPath()
	pin, err := readHostPin(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c.failf("no host is pinned for this controller (%s is absent): root pins it first: steward-installer controller-pin-host BUNDLE", path), false
	case err != nil:
		return c.failf("the host pin: %v", err), false
	}
	if d := pin.differences(pinOf(b)); d != "" {
		return c.refusef("%s: %s (%s): not installed; only root re-pins the host (steward-installer controller-pin-host)", operand, d, path), false
	}
	return ExitOK, true
}
