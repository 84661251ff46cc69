package installer

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
)

// configMode is the installed controller config's mode: the controller's
// own, like its keys and bundle.
const configMode = 0o600

// ConfigResult is what controller-config prints, one JSON line.
type ConfigResult struct {
	Config       string `json:"config"`       // the installed file
	Changed      bool   `json:"changed"`      // false when the same bytes were already there
	ConfigSha256 string `json:"configSha256"` // canonical SHA-256: the binding it gives the journal
	// JournalBindingSha256 is the binding of the controller's journal when
	// one exists, else "". When it differs from ConfigSha256 the controller
	// will refuse to start until controller-enroll rebinds it; Next says so.
	JournalBindingSha256 string `json:"journalBindingSha256,omitempty"`
	Next                 string `json:"next"`
}

// runControllerConfig installs the controller's config: root only (it is
// in no sudo column), because the config says whom the controller admits
// and, with the payer policy, what it pays; the operator account must not
// be able to change that. In order:
//
//  1. the file is read as a private file of the invoking account (root,
//     or SUDO_UID when root ran it through sudo) and parsed strictly
//     (ctlconf.Parse);
//  2. it must name the installed layout: the state directory and the
//     three socket paths the units serve (ControllerEnv), since the
//     controller can write nothing else and systemd makes nothing else;
//  3. the installer becomes the controller's account for good, so every
//     later read and write is the controller's own;
//  4. the key directory must hold the four role keys, each loadable by the
//     controller (wire.ReadSigningKey refuses unsafe modes);
//  5. the bundle it names must be installed and match its services
//     (ctlconf.LoadBundle, what the controller checks at start);
//  6. the file replaces the installed one atomically, mode 0600; the same
//     bytes change nothing;
//  7. when the controller's journal exists and is bound to another config,
//     the result says that controller-enroll must rebind it first; while
//     an attempt is unresolved that enrollment would be refused, so the
//     config is not installed (the controller would not start with it).
func runControllerConfig(ctx context.Context, c *call, o options) int {
	owner, exit, ok := c.rootInput()
	if !ok {
		return exit
	}
	raw, err := ReadPrivateFile(o.operand, owner, ctlconf.MaxConfigBytes)
	if err != nil {
		return c.refusef("%v", err)
	}
	cfg, err := ctlconf.Parse(raw)
	if err != nil {
		return c.refusef("%s: %v", o.operand, err)
	}
	if err := checkInstalledLayout(cfg, c.env.Controller); err != nil {
		return c.refusef("%s: %v", o.operand, err)
	}
	if err := c.env.Controller.becomeController(); err != nil {
		return c.failf("%v", err)
	}
	if err := checkRoleKeys(cfg.KeyDir); err != nil {
		return c.refusef("%s: keyDir: %v", o.operand, err)
	}
	if _, err := ctlconf.LoadBundle(cfg); err != nil {
		return c.refusef("%s: %v (install the operator's bundle first: steward-installer bundle-install)", o.operand, err)
	}
	target, err := canonjson.Sum256(raw)
	if err != nil {
		return c.refusef("%s: %v", o.operand, err)
	}
	bound, open, err := journalState(cfg.JournalDir(), func(name, reason string) {
		fmt.Fprintf(c.stderr, "steward-installer %s: the controller's snapshot %s was not used: %s\n", c.verb, name, reason)
	})
	if err != nil {
		return c.failf("the controller's journal: %v", err)
	}
	rebind := bound != nil && *bound != target
	if rebind && len(open) > 0 {
		return c.failf("%d unresolved attempt(s) (%s) would block the enrollment this config needs, so it is not installed: %s", len(open), attemptIDs(open), resolveHint(open))
	}
	changed, err := replaceFile(c.env.Controller.Config, raw, configMode)
	if err != nil {
		return c.failf("%v", err)
	}
	res := ConfigResult{Config: c.env.Controller.Config, Changed: changed, ConfigSha256: hex.EncodeToString(target[:]),
		Next: "the controller reads it when it next starts"}
	if rebind {
		res.JournalBindingSha256 = hex.EncodeToString(bound[:])
		res.Next = fmt.Sprintf("the controller's journal is bound to another config: it will not start until `steward-installer controller-enroll REQUEST` rebinds it (expectedBindingSha256 %x, targetConfigSha256 %x)", *bound, target)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return c.failf("%v", err)
	}
	fmt.Fprintf(c.stdout, "%s\n", b)
	return ExitOK
}

// checkInstalledLayout refuses a config whose state directory or sockets
// are not the installed ones.
func checkInstalledLayout(cfg *ctlconf.Config, e ControllerEnv) error {
	for _, p := range []struct{ field, got, want string }{
		{"stateDir", cfg.StateDir, e.StateDir},
		{"sockets.mcp", cfg.Sockets.MCP, e.MCP},
		{"sockets.reverse", cfg.Sockets.Reverse, e.Reverse},
		{"sockets.foreground", cfg.Sockets.Foreground, e.Foreground},
	} {
		if p.got != p.want {
			return fmt.Errorf("%s is %q, but the installed controller's is %q", p.field, p.got, p.want)
		}
	}
	for _, o := range ownSockets {
		if p, dir := o.path(cfg.Sockets), filepath.Dir(e.MCP); p != "" && !o.beside(p, dir) {
			return fmt.Errorf("%s is %q, but the installed controller can serve it only in %s, beside its MCP socket (e.g. %q)",
				o.field, p, dir, filepath.Join(dir, o.name))
		}
	}
	return nil
}

// ownSocket is a socket the controller binds itself (no unit makes it):
// the streamable HTTP socket and the advisor socket. The installed unit
// lets the controller bind under /run only in the directory of its MCP
// socket, which agents may traverse; anywhere else it could not bind, or
// agents could not reach it. controller-config refuses such a path and
// status reports one (ownSocketFinding).
type ownSocket struct {
	field string // the config's field
	what  string // what is served there, as status says it
	name  string // its file name in the installed layout
	path  func(ctlconf.Sockets) string
}

// ownSockets are the sockets the controller binds itself, each 0666
// (ownSocketMode).
var ownSockets = []ownSocket{
	{field: "sockets.mcpHTTP", what: "MCP over streamable HTTP", name: "mcp-http.sock",
		path: func(s ctlconf.Sockets) string { return s.MCPHTTP }},
	{field: "sockets.advisor", what: "the advisors' MCP socket", name: "advisor.sock",
		path: func(s ctlconf.Sockets) string { return s.Advisor }},
}

// beside is the rule: the socket at p is in dir, the MCP socket's
// directory, itself (not below it).
func (ownSocket) beside(p, dir string) bool { return filepath.Dir(p) == dir }

// checkRoleKeys loads each of the four role keys as the controller will.
func checkRoleKeys(dir string) error {
	for _, f := range ctlconf.RoleKeyFiles() {
		if _, err := wire.ReadSigningKey(filepath.Join(dir, f)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s is missing (run `steward-controller keys init --dir %s` as the controller's account)", f, dir)
			}
			return err
		}
	}
	return nil
}

// journalState returns the binding of the journal in dir and its
// uncertain attempts, or a nil binding when there is no journal yet (the
// controller makes it at its first start). It reads the journal
// read-only from the controller's newest snapshot (ledger.OpenReadOnly):
// the controller may be running. Each snapshot it could not use is given
// to refused, with why.
func journalState(dir string, refused func(name, reason string)) (*[32]byte, []ledger.Attempt, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	ro, err := ledger.OpenReadOnly(dir)
	if err != nil {
		return nil, nil, err
	}
	defer ro.Journal.Close()
	for _, r := range ro.Rejected {
		refused(r.Name, r.Reason)
	}
	if ro.Journal.LastSeq() == 0 {
		return nil, nil, nil
	}
	b := ro.Journal.Binding()
	return &b, ro.Ledger.UncertainAttempts(), nil
}

// resolveHint says how the unresolved attempts open are resolved, naming
// the first: the controller records what the host says of it, and while
// the host still says uncertain its operator decides on the host.
func resolveHint(open []ledger.Attempt) string {
	id := open[0].ID
	return fmt.Sprintf("resolve them first: sudo steward-installer controller-attempt-resolve %s records what the host says of it; "+
		"while the host reports it uncertain, its operator resolves it there first (steward-operator attempts resolve %s --redeliver|--release|--charge --reason TEXT)", id, id)
}

// attemptIDs lists at most eight attempt ids for a message.
func attemptIDs(open []ledger.Attempt) string {
	ids := make([]string, 0, min(len(open), 8))
	for _, a := range open[:min(len(open), 8)] {
		ids = append(ids, a.ID)
	}
	return strings.Join(ids, " ")
}
