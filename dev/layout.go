package dev

import (
	"encoding/json"
	"path/filepath"

	"github.com/stewardrt/steward/internal/durable"
)

// Layout is where one dev-mode stack keeps everything. Each part has its own
// state directory, as in production each has its own account; the sockets
// are in a short runtime directory of their own (see socketDirFor).
type Layout struct {
	State         string // STATE: the root of the dev mode's state
	OperatorStore string // STATE/operator: the operator store (key, host journal)
	Controller    string // STATE/controller: the controller's state dir (its journal)
	ControllerKey string // STATE/controller/keys: its four role keys and controller.pub
	Config        string // STATE/controller/config.json
	Bundle        string // STATE/controller/host.bundle
	Appliance     string // STATE/appliance: the reference application's journal
	RouteRequest  string // STATE/route-request.json: the last route request registered
	Run           string // the sockets' directory (RUN)

	ApplianceSocket  string // RUN/appliance.sock: the application's upstream socket (host only)
	ForwardSocket    string // RUN/route-appliance.sock: the host's route listener (controller dials)
	ControlSocket    string // RUN/control.sock: the host's control socket for the controller (controller dials)
	ReverseSocket    string // RUN/reverse.sock: the controller's custody socket (host dials)
	MCPSocket        string // RUN/mcp.sock: the controller's MCP socket (agents)
	ForegroundSocket string // RUN/foreground.sock: the controller's foreground socket
	AdminSocket      string // RUN/admin.sock: the host's admin socket
	// MCPHTTPSocket is RUN/mcp-http.sock, the controller's streamable HTTP
	// socket (config sockets.mcpHTTP), on a stack that serves it
	// (Options.MCPHTTP, WithMCPHTTP); empty, and not in the config, on
	// any other.
	MCPHTTPSocket string
}

// NewLayout computes the layout of state directory state (made absolute):
// its directories, and the sockets in the directory an earlier start
// recorded in the controller's config or, before the first start, the one
// the first start will choose (socketDirFor). It creates nothing.
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
	run, err := recordedSocketDir(l)
	if err != nil {
		return Layout{}, err
	}
	if run == "" {
		run = socketDirFor(abs)
	}
	l.Run = run
	l.ApplianceSocket = filepath.Join(run, "appliance.sock")
	l.ForwardSocket = filepath.Join(run, "route-appliance.sock")
	l.ControlSocket = filepath.Join(run, "control.sock")
	l.ReverseSocket = filepath.Join(run, "reverse.sock")
	l.MCPSocket = filepath.Join(run, "mcp.sock")
	l.ForegroundSocket = filepath.Join(run, "foreground.sock")
	l.AdminSocket = filepath.Join(run, "admin.sock")
	return l, nil
}

// WithMCPHTTP is l on a stack whose controller also serves MCP over
// streamable HTTP, on RUN/mcp-http.sock.
func (l Layout) WithMCPHTTP() Layout {
	l.MCPHTTPSocket = filepath.Join(l.Run, "mcp-http.sock")
	return l
}

// Manifest is STATE/dev.json: where a client finds the running stack.
type Manifest struct {
	MCPSocket        string `json:"mcp_socket"`
	ForegroundSocket string `json:"foreground_socket"`
	OperatorStore    string `json:"operator_store"`
	ControllerState  string `json:"controller_state"`
	ApplianceSocket  string `json:"appliance_socket"`
	AdminSocket      string `json:"admin_socket"`
	// MCPHTTPSocket is the controller's streamable HTTP socket, on a stack
	// that serves it (Options.MCPHTTP).
	MCPHTTPSocket string `json:"mcp_http_socket,omitempty"`
}

// ManifestPath is the path of STATE/dev.json.
func (l Layout) ManifestPath() string { return filepath.Join(l.State, "dev.json") }

// writeManifest writes STATE/dev.json atomically (a temporary file renamed
// over it), so a reader never sees half of it.
func (l Layout) writeManifest() error {
	b, err := json.MarshalIndent(l.manifest(), "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteAtomic(l.ManifestPath(), append(b, '\n'), 0o600)
}

// manifest is what STATE/dev.json says of l.
func (l Layout) manifest() Manifest {
	return Manifest{
		MCPSocket:        l.MCPSocket,
		ForegroundSocket: l.ForegroundSocket,
		OperatorStore:    l.OperatorStore,
		ControllerState:  l.Controller,
		ApplianceSocket:  l.ApplianceSocket,
		AdminSocket:      l.AdminSocket,
		MCPHTTPSocket:    l.MCPHTTPSocket,
	}
}
