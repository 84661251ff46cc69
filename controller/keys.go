package controller

import (
	"fmt"
	"github.com/stewardrt/steward/controller/ctlconf"
	"os"
	"path/filepath"

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

// InitKeys creates the four role keys in dir (0700, created if absent;
// each key 0600, never overwritten) and the public key file, and returns the
// path of the public key file.
func InitKeys(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("keys init: %w", err)
	}
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
			return "", fmt.Errorf("keys init: %w", err)
		}
		if err := wire.WriteSigningKey(filepath.Join(dir, k.file), key); err != nil {
			return "", fmt.Errorf("keys init: %w", err)
		}
		*k.dst = key.Public().MarshalCOSEKey()
	}
	b, err := wire.Marshal(pub)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, PublicKeysFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("keys init: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("keys init: %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("keys init: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("keys init: %s: %w", path, err)
	}
	return path, nil
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
