package installer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/systemd"
	"github.com/stewardrt/steward/wire/msg"
)

// ctlFixture is an installed controller as the operator verbs see it: a
// config file, a state dir and (once started) a journal, all owned by the
// test's own account (ControllerEnv.Account ""), in a temp dir.
type ctlFixture struct {
	dir    string
	cfg    controller.Config
	env    Env
	config string // path of the installed config
}

// newCtlFixture makes the controller's files for controller name, and an
// Env that runs the operator verbs for operatorUID through "sudo".
func newCtlFixture(t *testing.T, name string) *ctlFixture {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "ctl")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &ctlFixture{dir: dir, config: filepath.Join(state, "config.json")}
	f.cfg = controller.Config{
		Name: name, StateDir: state, KeyDir: filepath.Join(state, "keys"), Bundle: filepath.Join(state, "host.bundle"),
		Sockets: controller.Sockets{MCP: filepath.Join(dir, "mcp.sock"), Reverse: filepath.Join(dir, "reverse.sock"),
			Foreground: filepath.Join(dir, "foreground.sock")},
		Agents: controller.Agents{UIDs: []uint32{}, GIDs: []uint32{}},
	}
	f.env = Env{EUID: os.Geteuid(), SudoUID: strconv.FormatUint(uint64(operatorUID()), 10),
		Executable: "/nonexistent/steward-installer",
		Controller: ControllerEnv{Config: f.config, Bundle: filepath.Join(state, "default.bundle"),
			StateDir: state, Foreground: filepath.Join(dir, "default-foreground.sock")}}
	return f
}

// configBytes is the fixture's config with the agent allow-list uids.
func (f *ctlFixture) configBytes(t *testing.T, agentUIDs ...uint32) []byte {
	t.Helper()
	c := f.cfg
	c.Agents.UIDs = append([]uint32{}, agentUIDs...)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.ParseConfig(b); err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// install writes b as the installed config.
func (f *ctlFixture) install(t *testing.T, b []byte) {
	t.Helper()
	if err := os.WriteFile(f.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// start creates the controller's journal bound to the canonical form of
// config b, as the controller's first start does, and returns it open (the
// caller closes it).
func (f *ctlFixture) start(t *testing.T, b []byte) *journal.Journal {
	t.Helper()
	j, err := journal.Open(filepath.Join(f.cfg.StateDir, "journal"),
		journal.Options{Owner: ledger.JournalOwner, Format: ledger.JournalFormat, Config: canonical(t, b), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// canonical is the canonical form of a config, which the controller's
// journal binds.
func canonical(t *testing.T, b []byte) []byte {
	t.Helper()
	c, err := canonjson.CanonicalJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// binding is the hex canonical SHA-256 of a config.
func binding(t *testing.T, b []byte) string {
	t.Helper()
	h, err := canonjson.Sum256(b)
	if err != nil {
		t.Fatal(err)
	}
	return hexOf(h[:])
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

// makeBundle builds a real signed host bundle for controller name with one
// route "appliance", through package operator's store, as `steward-operator
// bundle build` does.
func makeBundle(t *testing.T, name string) []byte {
	t.Helper()
	return makeBundles(t, name, 4344)[0]
}

// makeBundles builds one bundle per host uid, all signed with the same
// (fresh) host key.
func makeBundles(t *testing.T, name string, hostUIDs ...uint32) [][]byte {
	t.Helper()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if _, err := operator.Init(store); err != nil {
		t.Fatal(err)
	}
	pubPath, err := controller.InitKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AddController(name, 4343, pub, systemd.ControlSocketPath(name)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterRoute("appliance", "appliance", views.RouteRequest{
		Controller: name, Upstream: "/run/appliance.sock", Forward: "/run/steward/host/appliance.sock",
		Reverse: "/run/steward/controller/reverse.sock", Prefix: "/v1",
		Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 1000},
	}); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, uid := range hostUIDs {
		b, err := st.BuildBundle(name, uid)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// writeOperatorFile writes data as an operator-owned 0600 file in a fresh
// private directory.
func writeOperatorFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(privateDir(t), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, p, operatorUID())
	return p
}

// pinHost pins the host of bundle for the fixture's controller, as root
// does with controller-pin-host (here root through its own sudo, so the
// file is the operator's private file).
func (f *ctlFixture) pinHost(t *testing.T, bundle []byte) {
	t.Helper()
	code, out, errs := run(t, f.env, "controller-pin-host", writeOperatorFile(t, "pin.bundle", bundle))
	if code != ExitOK || errs != "" {
		t.Fatalf("controller-pin-host: exit %d\n%s%s", code, out, errs)
	}
}
