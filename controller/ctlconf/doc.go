// Package ctlconf is the controller's installed config: its format, its
// bounds and the checks it must pass. It is a package of its own so that
// the root installer, which writes and reads the config for the operator
// (`steward-installer controller-config`, `controller-enroll`), links this
// parser and nothing else of the controller: no MCP SDK, no journal
// replay, no keys.
//
// Usage:
//
//	cfg, raw, err := ctlconf.Load(path) // the journal binds raw's canonical form
//	if err != nil { ... }                // one line wrapping ErrConfig
//	dir := cfg.JournalDir()
//
// The controller itself aliases these types (controller.Config and the
// rest) and adds what needs more than the config file: the bundle, the
// keys, the journal.
package ctlconf
