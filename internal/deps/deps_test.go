package deps

import (
	"slices"
	"strings"
	"testing"
)

// The import rules. Packages are named relative to the module
// (github.com/stewardrt/steward); "x/..." is x and every package under it,
// "..." every package of the module. Each rule is about what a package
// reaches through its non-test imports, directly or transitively:
//
//   - may, when not nil, lists the only steward packages it may reach,
//     together with what those may reach by their own rules (none: nothing
//     of steward's);
//   - mayNot lists steward packages it must not reach;
//   - modules, when not nil, lists the only modules outside the standard
//     library and steward it may reach.
//
// Adding an arrow that breaks a rule is a design change: change DESIGN.md
// section 11 and this table together.
var rules = []rule{
	// The leaves: the formats the rest of steward shares, each with one
	// owner and nothing of steward's beneath it but the CBOR heads.
	{pkg: "canonjson", may: none, modules: none},
	{pkg: "internal/cborhead", may: none, modules: none},
	{pkg: "wire", may: []string{"internal/cborhead"}},
	{pkg: "journal", may: []string{"internal/cborhead"}},

	// What a daemon derives from its journal (DESIGN.md section 13): the
	// history index, on bbolt, the snapshot files and their keeper. Neither reaches a
	// key or a socket: a snapshot's signature is the owner's func.
	{pkg: "journal/index", may: []string{"journal"}, modules: indexModules},
	{pkg: "journal/snapshot", may: []string{"journal", "internal/durable", "internal/failpoint"}, modules: journalModules},
	// The keeper of the two: opening from a snapshot, making the next.
	{pkg: "journal/history", may: []string{"journal", "journal/index", "journal/snapshot", "internal/failpoint"}, modules: indexModules},
	{pkg: "oracleops", may: []string{"canonjson"}},
	{pkg: "wire/msg", may: []string{"wire"}},

	// The installer runs as root: it links the controller's config and
	// foreground protocol (controller/ctlconf, controller/foreground), not
	// the controller, nor the operator, nor the MCP SDK and what that
	// brings (OAuth2, a third-party JSON package).
	{pkg: "installer", mayNot: []string{"controller", "operator/..."}, modules: installerModules},
	{pkg: "cmd/steward-installer", mayNot: []string{"controller", "operator/..."}, modules: installerModules},
	{pkg: "controller/ctlconf", mayNot: []string{"controller"}},
	// The controller journal's record language and its ledger, which the
	// installer links too: it reads snapshots (journal/snapshot) but never
	// the history index's database (journal/index, bbolt) nor the keeper
	// that opens one (journal/history): the ledger reaches the index
	// through an interface of its own, which the controller fills.
	{pkg: "controller/ledger", may: []string{"journal", "journal/snapshot", "wire", "wire/msg"}},
	{pkg: "controller/foreground", mayNot: []string{"controller"}},

	// The keyless proxy is the only code that runs in an agent's account:
	// it cannot reach keys because it links nothing that holds them.
	{pkg: "controller/mcpproxy", may: none, modules: []string{"golang.org/x/sys"}},

	// The operator's side is ten packages, each on the floor below the
	// next (DESIGN.md section 11): the record language (hostlog), the
	// views and forms of the host's commands (views), the history on disk
	// (hosthist: snapshots and the history index), the routes and their
	// checks, a part of the core's state under its lock (routetable), what
	// crosses between the store and the running host (hostapi: the Daemon
	// contract and the filtered listing, which reach no socket), the
	// custody core (operator), the audit, which reads the journal and
	// never the store (audit), the admin language (admin), the daemon
	// (host) and the command line (cli). Each may reach only what is
	// beneath it.
	{pkg: "operator/hostlog", may: []string{"journal", "wire", "wire/msg", "oracleops", "canonjson"}},
	{pkg: "operator/views", may: []string{"operator/hostlog"}},
	{pkg: "operator/hosthist", may: []string{"operator/hostlog", "journal/history"}},
	{pkg: "operator/routetable", may: []string{"operator/views"}},
	{pkg: "operator/hostapi", may: []string{"oracleops", "wire", "wire/msg"}},
	{pkg: "operator", may: []string{"operator/views", "operator/hosthist", "operator/routetable", "operator/hostapi", "internal/durable", "internal/failpoint"}},
	{pkg: "operator/audit", may: []string{"operator/hostlog"}},
	{pkg: "operator/admin", may: []string{"operator"}},
	{pkg: "operator/host", may: []string{"operator/admin"}},
	{pkg: "operator/cli", may: []string{"operator/admin", "operator/audit", "operator/host", "systemd"}},

	// Test support (internal/hosttest, internal/peertest) is for tests:
	// no package of steward's own code links it.
	{pkg: "operator/...", mayNot: testSupport},
	{pkg: "controller/...", mayNot: testSupport},
	{pkg: "installer", mayNot: testSupport},
	{pkg: "dev", mayNot: testSupport},
	{pkg: "cmd/...", mayNot: testSupport},

	// The two sides of custody never link each other.
	{pkg: "operator/...", mayNot: []string{"controller/..."}},
	{pkg: "controller/...", mayNot: []string{"operator/..."}},

	// The reference application knows nothing of custody. It reaches
	// the operations protocol and its own history (DESIGN.md section 13:
	// the keeper, and through it the journal, the history index and the
	// snapshots), nothing else of steward's.
	{pkg: "appliance", mayNot: custody},
	{pkg: "appliance", may: []string{"oracleops", "journal/history", "internal/durable", "internal/failpoint"}},
	{pkg: "cmd/steward-appliance", mayNot: custody},

	// A main only parses flags and calls in: nothing imports one.
	{pkg: "...", mayNot: []string{"cmd/..."}},
}

// testSupport are the packages that are test support only.
var testSupport = []string{"internal/hosttest", "internal/peertest"}

// none is an empty allow-list (nil means "not checked").
var none = []string{}

// custody is the code that holds or checks keys and grants.
var custody = []string{"wire/...", "operator/...", "controller/..."}

// journalModules are the modules package journal links (the CBOR
// package and its float16, x/sys); indexModules adds bbolt.
var (
	journalModules = []string{"github.com/fxamacker/cbor/v2", "github.com/x448/float16", "golang.org/x/sys"}
	indexModules   = append([]string{"go.etcd.io/bbolt"}, journalModules...)
)

// installerModules are the modules the root installer may link, and who
// brings each: wire (circl, fxamacker/cbor and its x448/float16,
// golang.org/x/sys), journal (the same cbor, x/sys), systemd
// (coreos/go-systemd) and oracleops, for the names and bounds of the
// config (santhosh-tekuri/jsonschema, which decodes with encoding/json,
// and its golang.org/x/text).
var installerModules = []string{
	"github.com/cloudflare/circl",
	"github.com/coreos/go-systemd/v22",
	"github.com/fxamacker/cbor/v2",
	"github.com/santhosh-tekuri/jsonschema/v6",
	"github.com/x448/float16",
	"golang.org/x/sys",
	"golang.org/x/text",
}

// pending are the rules today's tree breaks because the work that fixes
// them (issue 11, P1.2 item 1) is under way. Their violations are logged,
// not failed; an entry whose violation no longer occurs fails the test,
// so whoever fixes it must delete the entry and the rule applies in full.
var pending = []pend{}

// TestImportRules checks every rule against the module's import graph.
func TestImportRules(t *testing.T) {
	g := loadGraph(t)
	rep := g.check(rules, pending)
	for _, v := range rep.violations {
		t.Errorf("import rule broken: %s", v)
	}
	for _, p := range rep.pending {
		t.Logf("pending: %s", p)
	}
	for _, s := range rep.stale {
		t.Errorf("pending entry is stale: %s", s)
	}
}

// TestBinaryDependencies logs, for each command, how many packages it
// links from outside steward: the count the issue's note uses (`go list
// -deps ./cmd/X | grep -c '\.'` minus steward's own, which also counts the
// standard library's vendored golang.org/x packages) and the count of
// packages outside the standard library.
func TestBinaryDependencies(t *testing.T) {
	g := loadGraph(t)
	var cmds []string
	for path := range g {
		if strings.HasPrefix(path, module+"/cmd/") {
			cmds = append(cmds, path)
		}
	}
	slices.Sort(cmds)
	if len(cmds) == 0 {
		t.Fatal("no commands under cmd/")
	}
	for _, c := range cmds {
		n := g.count(c)
		t.Logf("%-22s %3d non-standard packages (grep -c '\\.' %d minus steward's %d); %d outside the standard library",
			strings.TrimPrefix(c, module+"/cmd/"), n.dotted-n.steward, n.dotted, n.steward, n.nonStandard)
	}
}
