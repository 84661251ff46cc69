package controller

import (
	"github.com/stewardrt/steward/controller/ctlconf"
)

// The config's format and bounds are package ctlconf's, which the root
// installer links without the rest of the controller; these names are
// the same things, for the controller's own code.
const (
	MaxConfigBytes = ctlconf.MaxConfigBytes
	MaxBundleBytes = ctlconf.MaxBundleBytes
)

// ErrConfig is wrapped by every refusal of a controller config.
var ErrConfig = ctlconf.ErrConfig

// Config is the controller's configuration (package ctlconf).
type Config = ctlconf.Config

// Sockets are the controller's listening sockets (package ctlconf).
type Sockets = ctlconf.Sockets

// Agents is the allow-list of the MCP socket (package ctlconf).
type Agents = ctlconf.Agents

// ParseConfig is ctlconf.Parse.
func ParseConfig(raw []byte) (*Config, error) { return ctlconf.Parse(raw) }

// LoadConfig is ctlconf.Load.
func LoadConfig(path string) (*Config, []byte, error) { return ctlconf.Load(path) }

func readBounded(path string, limit int64) ([]byte, error) { return ctlconf.ReadBounded(path, limit) }

// Binding is what the controller trusts of its host (package ctlconf).
type Binding = ctlconf.Binding

// LoadBundle is ctlconf.LoadBundle.
func LoadBundle(c *Config) (*Binding, error) { return ctlconf.LoadBundle(c) }

// Payer is the payer policy of a config (package ctlconf).
type Payer = ctlconf.Payer

// PayerLimits are one principal's payer limits (package ctlconf).
type PayerLimits = ctlconf.PayerLimits
