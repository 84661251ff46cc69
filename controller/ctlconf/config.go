package ctlconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stewardrt/steward/oracleops"
)

// MaxConfigBytes bounds the config file. A config is a few hundred bytes;
// the bound keeps a mistaken path (a log, a binary) from being read whole.
const MaxConfigBytes = 65536

// MaxBundleBytes bounds the host bundle file the config names.
const MaxBundleBytes = 1 << 20

// ErrConfig is wrapped by every refusal of a controller config.
var ErrConfig = errors.New("controller config refused")

// Config is the controller's configuration, read from JSON with unknown
// fields refused. Its canonical JSON is the binding of the controller's
// journal (DESIGN.md section 4).
type Config struct {
	Name     string  `json:"name"`     // the controller's name, as the operator pinned it
	StateDir string  `json:"stateDir"` // the journal lives in STATEDIR/journal
	KeyDir   string  `json:"keyDir"`   // the four role keys
	Bundle   string  `json:"bundle"`   // the host bundle from `steward-operator bundle build`
	Sockets  Sockets `json:"sockets"`
	Agents   Agents  `json:"agents"`
	// ForegroundUIDs may use the foreground socket; absent means root and
	// the controller's own account (see ForegroundPeers).
	ForegroundUIDs []uint32 `json:"foregroundUids,omitempty"`
	// Payer is the payer policy: without one, every charge is refused.
	Payer *Payer `json:"payer,omitempty"`
	// Dispatch sets the calls' timeouts (their deadlines); absent, the
	// defaults (DefaultDispatchTimeoutMs, DefaultMaxDispatchTimeoutMs).
	// Omitted when absent, so a config from before it binds the same.
	Dispatch *DispatchTimeouts `json:"dispatch,omitempty"`

	// agentNames maps the uid of each named agent to its name: what Parse
	// resolved of Agents.Named (AgentOf).
	agentNames map[uint32]string
}

// Sockets are the controller's listening sockets.
type Sockets struct {
	MCP        string `json:"mcp"`
	Reverse    string `json:"reverse"`
	Foreground string `json:"foreground"`
	// MCPHTTP, when set, is a socket on which the controller also serves
	// MCP over streamable HTTP, with mcp's peer checks and bounds; absent,
	// it is not served. Omitted when absent, so a config from before it
	// binds the same.
	MCPHTTP string `json:"mcpHTTP,omitempty"`
	// Advisor, when set, is the socket on which the controller serves
	// advisor agents their two tools (listing the asks they may answer,
	// answering one), bound by the controller itself like mcpHTTP; absent,
	// it is not served. Omitted when absent, so a config from before it
	// binds the same.
	Advisor string `json:"advisor,omitempty"`
}

// retiredFields are the fields a controller config had while it listed
// its applications: the host's active routes are its applications now
// (the control socket answers them live), so a config that still has one
// is refused saying so, rather than with an unknown-field error.
var retiredFields = []string{"toolTask", "allowedApplicationLifetimeRoutes"}

// refuseRetired refuses a config object that still has a retired field.
func refuseRetired(raw []byte) error {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil // the strict decode says what is wrong with it
	}
	var found []string
	for _, f := range retiredFields {
		if _, ok := top[f]; ok {
			found = append(found, f)
		}
	}
	if len(found) == 0 {
		return nil
	}
	them := "them"
	if len(found) == 1 {
		them = "it"
	}
	return fmt.Errorf("%s: no longer part of a controller config: the host's active routes are its applications; remove %s and enroll the config with steward-installer controller-enroll",
		strings.Join(found, " and "), them)
}

// Parse decodes and validates a config (everything that can be checked
// without the bundle), resolving its named agents' accounts and groups in
// the system's account database (see Agents). Unknown fields (the retired
// toolTask and allowedApplicationLifetimeRoutes with their own line) and
// trailing data are refused, each with one line that wraps ErrConfig.
func Parse(raw []byte) (*Config, error) {
	if len(raw) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the bound of %d", ErrConfig, len(raw), MaxConfigBytes)
	}
	if err := refuseRetired(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the config object", ErrConfig)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &c, nil
}

// Load reads and parses the config file at path, returning the raw bytes
// too: their canonical form (canonjson) is what the journal binds.
func Load(path string) (*Config, []byte, error) {
	raw, err := ReadBounded(path, MaxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, raw, nil
}

// JournalDir is where a config's journal lives.
func (c *Config) JournalDir() string { return filepath.Join(c.StateDir, "journal") }

// ForegroundPeers returns the UIDs admitted on the foreground socket: the
// config's list, or, when it has none, root and self (the controller's own
// account, as which the installer dials it).
func (c *Config) ForegroundPeers(self uint32) []uint32 {
	if c.ForegroundUIDs == nil {
		if self == 0 {
			return []uint32{0}
		}
		return []uint32{0, self}
	}
	return c.ForegroundUIDs
}

func (c *Config) validate() error {
	if err := ValidateName("name", c.Name); err != nil {
		return err
	}
	for _, p := range []struct{ field, path string }{
		{"stateDir", c.StateDir}, {"keyDir", c.KeyDir}, {"bundle", c.Bundle},
		{"sockets.mcp", c.Sockets.MCP}, {"sockets.reverse", c.Sockets.Reverse},
		{"sockets.foreground", c.Sockets.Foreground},
	} {
		if p.path == "" || !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return fmt.Errorf("%s: %q must be a clean absolute path", p.field, p.path)
		}
	}
	socks := []string{c.Sockets.MCP, c.Sockets.Reverse, c.Sockets.Foreground}
	// The sockets a config may leave out: not served when absent.
	for _, p := range []struct{ field, path string }{
		{"sockets.mcpHTTP", c.Sockets.MCPHTTP}, {"sockets.advisor", c.Sockets.Advisor},
	} {
		if p.path == "" {
			continue
		}
		if !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return fmt.Errorf("%s: %q must be a clean absolute path", p.field, p.path)
		}
		socks = append(socks, p.path)
	}
	n := len(socks)
	slices.Sort(socks)
	if len(slices.Compact(socks)) != n {
		return errors.New("sockets: mcp, reverse, foreground, mcpHTTP and advisor (the last two when set) must be different paths")
	}
	if err := c.validateDispatch(); err != nil {
		return err
	}
	names, err := c.Agents.resolveAgents()
	if err != nil {
		return err
	}
	c.agentNames = names
	if c.Payer != nil {
		return c.Payer.validate()
	}
	return nil
}

// ValidateName checks a name of the config: the id alphabet of
// oracle-operations-v1 (1 to 80 of A-Za-z0-9_-, plus '.'), so that names
// are safe in logs and file names.
func ValidateName(field, s string) error {
	if s == "" || len(s) > oracleops.MaxIDLen {
		return fmt.Errorf("%s: %q must be 1 to %d bytes", field, s, oracleops.MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%s: %q has byte %q at offset %d, not one of A-Za-z0-9._-", field, s, c, i)
		}
	}
	return nil
}

// ReadBounded reads a regular file of at most limit bytes.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than the bound of %d bytes", path, limit)
	}
	return b, nil
}

// Key file names inside a config's KeyDir: the four role keys that
// `steward-controller keys init` writes, and the public half of them.
const (
	ControllerKeyFile = "controller.key"
	ToolKeyFile       = "tool.key"
	DispatchKeyFile   = "dispatch.key"
	ProviderKeyFile   = "provider.key"
	// PublicKeysFile holds msg.ControllerKeys (CBOR), the file
	// `steward-operator controller add --keys` reads.
	PublicKeysFile = "controller.pub"
)

// RoleKeyFiles lists the four role key files, in the order the controller
// loads them.
func RoleKeyFiles() []string {
	return []string{ControllerKeyFile, ToolKeyFile, DispatchKeyFile, ProviderKeyFile}
}
