package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/host"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// binDir holds steward-controller built once per test binary.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func controllerBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stw-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "steward-controller")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/stewardrt/steward/cmd/steward-controller").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// stack is a real host (package operator, in-process), a real application
// on its Unix socket, and a controller config, keys and bundle for it.
type stack struct {
	t        testing.TB
	dir      string
	store    string
	cfgPath  string
	cfg      *Config
	appSock  string
	price    uint64
	funded   uint64
	stopHost context.CancelFunc
	hostDone chan error
	stopCtl  context.CancelFunc
	ctlDone  chan error
	hostNow  func() time.Time // the host's wall clock when set (host.ServeOptions.Now)
	// settled waits for the in-process controller's result records
	// journaled after their answers (Options.settled); nil until it runs.
	settled func()
	live    *Controller // the in-process controller, once open
}

// settle waits until the in-process controller's answers so far have
// their result records on disk (resultwrite.go): a test that reads the
// journal after a call reads it complete.
func (s *stack) settle() {
	if s.settled != nil {
		s.settled()
	}
}

type stackOpts struct {
	price     uint64
	refusal   uint64 // the grant's refusal price
	funded    uint64
	notBefore time.Time              // the grant's; zero: now
	edit      func(m map[string]any) // edits the controller config
	noApp     bool                   // serve nothing on the application's socket (the test does)
	discovery uint64                 // the grant's discovery price
	more      []stackApp             // applications besides "appliance"
}

// stackApp is one more application of a stack: an appliance serving as
// application name on its own socket, with its own grant and route
// r-NAME.
type stackApp struct {
	name             string
	price, discovery uint64
	operations       []string // the grant's operation patterns; none: all
	noApp            bool     // nobody serves its socket: the host cannot reach it
}

func newStack(t testing.TB, o stackOpts) *stack {
	t.Helper()
	if o.price == 0 {
		o.price = 5
	}
	if o.funded == 0 {
		o.funded = 1000
	}
	// Socket paths must stay under 108 bytes: a short private dir in /tmp.
	dir, err := os.MkdirTemp("", "stw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &stack{t: t, dir: dir, store: filepath.Join(dir, "store"), appSock: filepath.Join(dir, "app.sock"), price: o.price, funded: o.funded}
	if !o.noApp {
		startAppliance(t, s.appSock, filepath.Join(dir, "app-state"))
	}

	uid := uint32(os.Getuid())
	if _, err := operator.Init(s.store); err != nil {
		t.Fatal(err)
	}
	keyDir := filepath.Join(dir, "keys")
	pubPath, err := InitKeys(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := operator.Open(s.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddController("dev", uid, pub, filepath.Join(dir, "control.sock")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FundPurse("dev", o.funded); err != nil {
		t.Fatal(err)
	}
	if _, err := st.IssueGrant(views.GrantSpec{Controller: "dev", Application: "appliance", Price: o.price, DiscoveryPrice: o.discovery,
		RefusalPrice: o.refusal, PerDay: 1 << 30, NotBefore: o.notBefore, NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterRoute("r-appliance", "appliance", views.RouteRequest{
		Controller: "dev", Upstream: s.appSock, Forward: filepath.Join(dir, "fwd.sock"),
		Reverse: filepath.Join(dir, "rev.sock"), Prefix: "/v1",
		Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 10000},
	}); err != nil {
		t.Fatal(err)
	}
	for _, a := range o.more {
		s.addApp(st, a)
	}
	bundle, err := st.BuildBundle("dev", uid)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bundlePath := filepath.Join(dir, "host.bundle")
	if err := os.WriteFile(bundlePath, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		"name": "dev", "stateDir": filepath.Join(dir, "cstate"), "keyDir": keyDir, "bundle": bundlePath,
		"sockets":        map[string]any{"mcp": filepath.Join(dir, "mcp.sock"), "reverse": filepath.Join(dir, "rev.sock"), "foreground": filepath.Join(dir, "fg.sock")},
		"agents":         map[string]any{"uids": []uint32{uid}, "gids": []uint32{}},
		"foregroundUids": []uint32{uid},
		// A payer policy that never limits, the foreground's allowance
		// included: tests of the policy edit it.
		"payer": map[string]any{"maxPerCall": 1 << 20, "perDay": uint64(1) << 50,
			"foregroundAllowance": map[string]any{"maxPerCall": 1 << 20, "perDay": uint64(1) << 50}},
	}
	if o.edit != nil {
		o.edit(m)
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	s.cfgPath = filepath.Join(dir, "controller.json")
	if err := os.WriteFile(s.cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if s.cfg, err = ParseConfig(raw); err != nil {
		t.Fatal(err)
	}
	s.startHost()
	t.Cleanup(s.stop)
	return s
}

// addApp serves, grants and routes one more application of the stack.
func (s *stack) addApp(st *operator.Store, a stackApp) {
	s.t.Helper()
	sock := filepath.Join(s.dir, a.name+".sock")
	if !a.noApp {
		startAppliance(s.t, sock, filepath.Join(s.dir, a.name+"-state"))
	}
	if _, err := st.IssueGrant(views.GrantSpec{Controller: "dev", Application: a.name, Price: a.price, DiscoveryPrice: a.discovery,
		Operations: a.operations, PerDay: 1 << 30, NotAfter: time.Now().Add(time.Hour)}); err != nil {
		s.t.Fatal(err)
	}
	if _, err := st.RegisterRoute("r-"+a.name, a.name, views.RouteRequest{
		Controller: "dev", Upstream: sock, Forward: filepath.Join(s.dir, "fwd-"+a.name+".sock"),
		Reverse: filepath.Join(s.dir, "rev.sock"), Prefix: "/v1",
		Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 10000},
	}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) startHost() {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	s.hostDone = make(chan error, 1)
	go func() {
		s.hostDone <- host.Serve(ctx, s.store, host.ServeOptions{Ready: func() { close(ready) }, Now: s.hostNow})
	}()
	select {
	case <-ready:
	case err := <-s.hostDone:
		s.t.Fatalf("host: %v", err)
	}
	s.stopHost = cancel
}

// startController runs the controller in this process.
func (s *stack) startController() { s.startControllerWith(Options{}) }

// startControllerWith runs the controller in this process with opts (its
// Ready is the stack's).
func (s *stack) startControllerWith(opts Options) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	s.ctlDone = make(chan error, 1)
	opts.Ready = func() { close(ready) }
	opts.settled = &s.settled
	opts.opened = func(c *Controller) { s.live = c }
	go func() { s.ctlDone <- Serve(ctx, s.cfgPath, opts) }()
	select {
	case <-ready:
	case err := <-s.ctlDone:
		s.t.Fatalf("controller: %v", err)
	}
	s.stopCtl = cancel
}

func (s *stack) stopController() {
	if s.stopCtl != nil {
		s.stopCtl()
		if err := <-s.ctlDone; err != nil {
			s.t.Errorf("controller: %v", err)
		}
		s.stopCtl = nil
	}
}

func (s *stack) stop() {
	s.stopController()
	if s.stopHost != nil {
		s.stopHost()
		if err := <-s.hostDone; err != nil {
			s.t.Errorf("host: %v", err)
		}
		s.stopHost = nil
	}
}

// restartHost stops the in-process host and starts it again. A host's
// shutdown drains every dispatch in flight (consent, delivery, outcome), so
// after it the host's journal holds the final state of every attempt it was
// given: a test waits for that instead of polling inspect.
func (s *stack) restartHost() {
	s.t.Helper()
	s.stopHost()
	if err := <-s.hostDone; err != nil {
		s.t.Fatalf("host: %v", err)
	}
	s.stopHost = nil
	s.startHost()
}

// child is the controller running as its own process (for failpoints).
type child struct {
	cmd  *exec.Cmd
	done chan error
}

// startChild runs `steward-controller serve` with env added, waiting for
// its "controller ready" log line on stderr.
func (s *stack) startChild(env ...string) *child {
	s.t.Helper()
	return s.startChildArgs(nil, env...)
}

// startChildArgs is startChild with more arguments to serve.
func (s *stack) startChildArgs(args []string, env ...string) *child {
	s.t.Helper()
	cmd := exec.Command(controllerBin(s.t), append([]string{"serve", "--config", s.cfgPath}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "controller ready") {
				once = true
				close(ready)
			}
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, "child:", sc.Text())
			}
		}
		io.Copy(io.Discard, stderr)
		c.done <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-c.done:
		s.t.Fatalf("controller child exited before ready: %v", err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		s.t.Fatal("controller child not ready within 30s")
	}
	s.t.Cleanup(func() { cmd.Process.Kill() })
	return c
}

// client connects an MCP client through the real proxy binary.
func (s *stack) client(ctx context.Context) *mcp.ClientSession {
	s.t.Helper()
	cmd := exec.Command(controllerBin(s.t), "mcp", "--socket", s.cfg.Sockets.MCP)
	c := mcp.NewClient(&mcp.Implementation{Name: "steward-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		s.t.Fatalf("mcp connect: %v", err)
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// lastSeq reads the controller journal's last sequence number read-only.
func (s *stack) lastSeq() uint64 {
	s.t.Helper()
	s.settle()
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	return j.LastSeq()
}

// purse reads the host's purse for "dev" read-only.
func (s *stack) purse() views.PurseView {
	s.t.Helper()
	st, err := operator.OpenReadOnly(s.store)
	if err != nil {
		s.t.Fatal(err)
	}
	defer st.Close()
	p, err := st.PurseShow("dev")
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

// call runs one tool, checks its result as a validating client would
// (checkToolResult, results_test.go) and decodes it.
func call(t testing.TB, ctx context.Context, cs *mcp.ClientSession, tool string, args any) (ToolResult, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	checkToolResult(t, tool, res)
	var tr ToolResult
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			json.Unmarshal([]byte(tc.Text), &tr)
		}
	}
	return tr, res
}
