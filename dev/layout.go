package dev

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stewardrt/steward/internal/durable"
	"os"
	"path/filepath"
)

// maxSunPath is the longest socket path a Unix socket address can hold on
// Linux (sun_path is 108 bytes including the terminating NUL).
const maxSunPath = 107

// bindOverhead is what package wire adds to a listening socket's directory
// while it binds: DIR/.bind-NNNNNNNNNN/s (os.MkdirTemp's random part is at
// most 10 digits). A directory holding a listening socket must leave room
// for it.
const bindOverhead = len("/.bind-4294967295/s")

// maxSocketDir is the longest directory that may hold a listening socket.
const maxSocketDir = maxSunPath - bindOverhead

// Layout is where one dev-mode stack keeps everything. Each part has its own
// state directory, as in production each has its own account.
type Layout struct {
	State         string // STATE: the root of the dev mode's state
	OperatorStore string // STATE/operator: the operator store (key, host journal)
	Controller    string // STATE/controller: the controller's state dir (its journal)
	ControllerKey string // STATE/controller/keys: its four role keys and controller.pub
	Config        string // STATE/controller/config.json
	Bundle        string // STATE/controller/host.bundle
	Appliance     string // STATE/appliance: the reference application's journal
	RouteRequest  string // STATE/route-request.json: the last route request registered
	Run           string // STATE/run: the sockets' directory

	ApplianceSocket  string // the application's upstream socket (host only)
	ForwardSocket    string // the host's route listener (controller dials)
	ReverseSocket    string // the controller's custody socket (host dials)
	MCPSocket        string // the controller's MCP socket (agents)
	ForegroundSocket string // the controller's foreground socket
}

// NewLayout computes the layout of state directory state (made absolute).
func NewLayout(state string) (Layout, error) {
	abs, err := filepath.Abs(state)
	if err != nil {
		return Layout{}, err
	}
	l := Layout{
		State:         abs,
		OperatorStore: filepath.Join(abs, "operator"),
		Controller:    filepath.Join(abs, "controller"),
		ControllerKey: filepath.Join(abs, "controller", "keys"),
		Config:        filepath.Join(abs, "controller", "config.json"),
		Bundle:        filepath.Join(abs, "controller", "host.bundle"),
		Appliance:     filepath.Join(abs, "appliance"),
		RouteRequest:  filepath.Join(abs, "route-request.json"),
	}
	l.Run = filepath.Join(abs, "run")
	l.ApplianceSocket = filepath.Join(l.Run, "appliance.sock")
	l.ForwardSocket = filepath.Join(l.Run, "route-appliance.sock")
	l.ReverseSocket = filepath.Join(l.Run, "reverse.sock")
	l.MCPSocket = filepath.Join(l.Run, "mcp.sock")
	l.ForegroundSocket = filepath.Join(l.Run, "foreground.sock")
	return l, nil
}

// checkSocketDir makes sure the sockets' directory exists, is a directory
// (not a link) owned by us and private (0700), and that every socket path
// in it fits.
func (l Layout) checkSocketDir() error {
	if err := os.Mkdir(l.Run, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("socket directory %s: %w", l.Run, err)
	}
	fi, err := os.Lstat(l.Run)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", l.Run, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s: not a directory", l.Run)
	}
	if fi.Mode().Perm() != 0o700 {
		return fmt.Errorf("socket directory %s: mode %04o, want 0700", l.Run, fi.Mode().Perm())
	}
	if uid, ok := ownerOf(fi); !ok || uid != uint32(os.Getuid()) {
		return fmt.Errorf("socket directory %s: not owned by uid %d", l.Run, os.Getuid())
	}
	for _, s := range []string{l.ApplianceSocket, l.ForwardSocket, l.ReverseSocket, l.MCPSocket, l.ForegroundSocket} {
		if len(s) > maxSunPath {
			return fmt.Errorf("socket path %s: %d bytes exceeds the sun_path bound of %d", s, len(s), maxSunPath)
		}
	}
	if len(l.Run) > maxSocketDir {
		return fmt.Errorf("socket directory %s: %d bytes exceeds %d, the longest that leaves room to bind a socket in it", l.Run, len(l.Run), maxSocketDir)
	}
	return nil
}

// checkStorePath refuses a state directory so long that the operator store's
// admin socket (STORE/admin.sock, bound through STORE/.bind-N/s) cannot be
// bound. The sockets of STATE/run then fit too (its longest path is shorter),
// so the sockets never need a directory outside STATE, and the socket paths
// the route record signs stay the same from one start to the next.
func (l Layout) checkStorePath() error {
	if len(l.OperatorStore) > maxSocketDir {
		return fmt.Errorf("state directory %s is too long: the operator store %s (%d bytes) holds the host's admin socket, "+
			"and a socket directory may be at most %d bytes; use a --state of at most %d bytes",
			l.State, l.OperatorStore, len(l.OperatorStore), maxSocketDir, maxSocketDir-len("/operator"))
	}
	return nil
}

// Manifest is STATE/dev.json: where a client finds the running stack.
type Manifest struct {
	MCPSocket        string `json:"mcp_socket"`
	ForegroundSocket string `json:"foreground_socket"`
	OperatorStore    string `json:"operator_store"`
	ControllerState  string `json:"controller_state"`
	ApplianceSocket  string `json:"appliance_socket"`
}

// ManifestPath is the path of STATE/dev.json.
func (l Layout) ManifestPath() string { return filepath.Join(l.State, "dev.json") }

// writeManifest writes STATE/dev.json atomically (a temporary file renamed
// over it), so a reader never sees half of it.
func (l Layout) writeManifest() error {
	b, err := json.MarshalIndent(Manifest{
		MCPSocket:        l.MCPSocket,
		ForegroundSocket: l.ForegroundSocket,
		OperatorStore:    l.OperatorStore,
		ControllerState:  l.Controller,
		ApplianceSocket:  l.ApplianceSocket,
	}, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteAtomic(l.ManifestPath(), append(b, '\n'), 0o600)
}

// checkSocketsRemoved reports a socket a daemon left behind after a clean
// shutdown.
func (l Layout) checkSocketsRemoved() error {
	var left []error
	for _, s := range []string{l.ApplianceSocket, l.ForwardSocket, l.ReverseSocket, l.MCPSocket, l.ForegroundSocket} {
		if _, err := os.Lstat(s); err == nil {
			left = append(left, fmt.Errorf("steward-dev: socket %s left after shutdown", s))
		}
	}
	return errors.Join(left...)
}
