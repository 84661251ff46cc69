package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Key file names inside the key directory (package ctlconf owns them).
const (
	ControllerKeyFile = ctlconf.ControllerKeyFile
	ToolKeyFile       = ctlconf.ToolKeyFile
	DispatchKeyFile   = ctlconf.DispatchKeyFile
	ProviderKeyFile   = ctlconf.ProviderKeyFile
	PublicKeysFile    = ctlconf.PublicKeysFile
)

// Keys are the controller's four role keys. The tool key signs forward
// frames (dispatch, inspect); the dispatch key signs reverse frames and
// payer consents; the controller and provider keys are pinned by the
// operator for later use and held here so that the set is whole.
type Keys struct {
	Controller, Tool, Dispatch, Provider *wire.SigningKey
}

// InitKeys creates the four role keys in dir (0700, its parents made 0700
// when absent; each key 0600) and the
// public key file, and returns the path of the public key file. The
// directory is built whole under a temporary name beside dir and renamed
// into place (durable.BuildDir), so a failure (a full disk) leaves no dir
// and a second keys init can succeed. An empty directory at dir (made by
// hand or by a packager) is replaced; any other dir is refused: keys are
// never overwritten. A temporary left by a crashed keys init is removed,
// and that logged on slog.Default().
func InitKeys(dir string) (string, error) {
	// os.Remove removes only an empty directory: that one is replaced; a
	// directory with entries stays for BuildDir to refuse.
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("keys init: %w", err)
		}
	}
	// The parents are made as before (0700); only dir itself is built whole.
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("keys init: %w", err)
	}
	err := durable.BuildDir(dir, 0o700, slog.Default(), writeKeys)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("keys init: %s already exists and is not empty: keys are never overwritten", dir)
	}
	if err != nil {
		return "", fmt.Errorf("keys init: %w", err)
	}
	return filepath.Join(dir, PublicKeysFile), nil
}

// writeKeys writes the four role keys and the public key file into dir,
// which exists and is empty.
func writeKeys(dir string) error {
	var pub msg.ControllerKeys
	for _, k := range []struct {
		file string
		dst  *[]byte
	}{
		{ControllerKeyFile, &pub.Controller}, {ToolKeyFile, &pub.Tool},
		{DispatchKeyFile, &pub.Dispatch}, {ProviderKeyFile, &pub.Provider},
	} {
		key, err := wire.GenerateSigningKey()
		if err != nil {
			return err
		}
		if err := wire.WriteSigningKey(filepath.Join(dir, k.file), key); err != nil {
			return err
		}
		*k.dst = key.Public().MarshalCOSEKey()
	}
	b, err := wire.Marshal(pub)
	if err != nil {
		return err
	}
	return durable.WriteNew(filepath.Join(dir, PublicKeysFile), b, 0o644)
}

// LoadKeys reads the four role keys from dir; wire.ReadSigningKey refuses a
// file or directory that others can read.
func LoadKeys(dir string) (*Keys, error) {
	var k Keys
	for _, f := range []struct {
		file string
		dst  **wire.SigningKey
	}{
		{ControllerKeyFile, &k.Controller}, {ToolKeyFile, &k.Tool},
		{DispatchKeyFile, &k.Dispatch}, {ProviderKeyFile, &k.Provider},
	} {
		key, err := wire.ReadSigningKey(filepath.Join(dir, f.file))
		if err != nil {
			return nil, err
		}
		*f.dst = key
	}
	return &k, nil
}

// ReadPublicKeys reads a public key file written by InitKeys.
func ReadPublicKeys(path string) (msg.ControllerKeys, error) {
	var pub msg.ControllerKeys
	b, err := readBounded(path, 64<<10)
	if err != nil {
		return pub, err
	}
	if err := wire.Unmarshal(b, &pub); err != nil {
		return pub, fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}
