package crashtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/notifytest"
	"github.com/stewardrt/steward/internal/testaccount"
)

// Price and funding of the harness's grant and purse: funded so that no
// call is refused as insufficient within any run the flags allow.
const (
	price  = 5
	funded = 1 << 40
)

// readyWithin bounds a daemon's start, from exec to READY.
const readyWithin = 60 * time.Second

// stack is the three daemons' files: binaries, store, state and sockets.
type stack struct {
	t          *testing.T
	accounts   map[string]*testaccount.Account // by daemon name; nil: all run as the test's account
	bin        string                          // directory of the three commands
	dir        string                          // everything else
	hostDir    string                          // the host's files
	store      string                          // the host's store
	ctlConfig  string                          // the controller's config
	appState   string
	appSocket  string
	mcpSocket  string
	hostNotify *notifytest.Socket
	ctlNotify  *notifytest.Socket
}

// buildCommands builds the three commands' mains into dir with `go build`,
// so that the harness runs exactly what users run.
func buildCommands(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", dir+"/",
		"github.com/stewardrt/steward/cmd/steward-operator",
		"github.com/stewardrt/steward/cmd/steward-controller",
		"github.com/stewardrt/steward/cmd/steward-appliance")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// newStack builds the commands and provisions the stack as call.txtar
// does: controller keys, a store with the controller pinned, a funded
// purse, a grant for the appliance, its route and the controller's bundle
// and config (with a payer policy).
func newStack(t *testing.T) *stack {
	// Socket paths must fit sun_path: a short directory under /tmp.
	dir, err := os.MkdirTemp("", "stw-crash")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept for inspection: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	s := &stack{t: t, accounts: daemonAccounts(t), dir: dir, bin: filepath.Join(dir, "bin"), hostDir: filepath.Join(dir, "host"),
		store: filepath.Join(dir, "host", "op"), ctlConfig: filepath.Join(dir, "ctl", "controller.json"),
		appState: filepath.Join(dir, "app", "state"), appSocket: filepath.Join(dir, "run-app", "app.sock"),
		mcpSocket:  filepath.Join(dir, "run-ctl", "mcp.sock"),
		hostNotify: notifytest.Listen(t), ctlNotify: notifytest.Listen(t)}
	for _, d := range []string{s.bin, filepath.Join(dir, "log")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each daemon's own files, and the directories of the sockets it
	// binds, which the daemon that connects to it may enter.
	ctlDir := filepath.Join(dir, "ctl")
	s.ownDir(filepath.Join(dir, "app"), "app", "")
	s.ownDir(s.hostDir, "host", "")
	s.ownDir(ctlDir, "ctl", "")
	s.ownDir(filepath.Join(dir, "run-app"), "app", "host")
	s.ownDir(filepath.Join(dir, "run-host"), "host", "ctl")
	s.ownDir(filepath.Join(dir, "run-ctl"), "ctl", "host")
	s.openToDaemons(map[string]*notifytest.Socket{"host": s.hostNotify, "ctl": s.ctlNotify})
	buildCommands(t, s.bin)
	agent := strconv.Itoa(os.Getuid()) // the MCP clients are this process
	ctlUID := strconv.Itoa(s.uid("ctl"))
	// The foreground socket serves the agent and whoever runs `attempts
	// resolve` (the CLIs run as the controller's account).
	foreground := agent
	if ctlUID != agent {
		foreground += ", " + ctlUID
	}
	keys := filepath.Join(ctlDir, "keys")
	route := filepath.Join(s.hostDir, "route.json")
	reverse := filepath.Join(dir, "run-ctl", "reverse.sock")
	s.writeAs(route, fmt.Appendf(nil, `{"controller": "dev", "upstream": %q, "forward": %q, "reverse": %q,
  "prefix": "/v1", "timeouts": {"connectMs": 2000, "responseMs": 30000}}`,
		s.appSocket, filepath.Join(dir, "run-host", "fwd.sock"), reverse), "host", 0o600)
	s.writeAs(s.ctlConfig, fmt.Appendf(nil, `{
  "name": "dev", "stateDir": %q, "keyDir": %q, "bundle": %q,
  "sockets": {"mcp": %q, "reverse": %q, "foreground": %q},
  "agents": {"uids": [%s], "gids": []},
  "foregroundUids": [%s],
  "payer": {"maxPerCall": 100, "perDay": %d}
}`, filepath.Join(ctlDir, "state"), keys, filepath.Join(ctlDir, "host.bundle"),
		s.mcpSocket, reverse, filepath.Join(dir, "run-ctl", "foreground.sock"),
		agent, foreground, int64(funded)), "ctl", 0o600)
	s.run("steward-controller", "keys", "init", "--dir", keys)
	// The operator is handed the controller's public keys, and the
	// controller the host's bundle, as an installation copies them.
	ctlPub := filepath.Join(s.hostDir, "controller.pub")
	s.give(filepath.Join(keys, "controller.pub"), ctlPub, "host", 0o644)
	s.run("steward-operator", "init", "--store", s.store)
	s.run("steward-operator", "controller", "add", "dev", "--uid", ctlUID, "--keys", ctlPub,
		"--control", filepath.Join(dir, "run-host", "control.sock"), "--store", s.store)
	s.run("steward-operator", "purse", "fund", "dev", strconv.Itoa(funded), "--store", s.store)
	s.run("steward-operator", "grant", "issue", "--controller", "dev", "--application", "appliance",
		"--price", strconv.Itoa(price), "--per-day", "1000000000", "--not-after", "+24h", "--store", s.store)
	s.run("steward-operator", "route", "register", "appliance", "appliance", route, "--store", s.store)
	bundle := filepath.Join(s.hostDir, "host.bundle")
	s.run("steward-operator", "bundle", "build", "dev", "--out", bundle, "--store", s.store)
	s.give(bundle, filepath.Join(ctlDir, "host.bundle"), "ctl", 0o644)
	return s
}

func (s *stack) write(path, text string) {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// run runs one of the commands to completion and returns its stdout,
// failing the test when it fails.
func (s *stack) run(name string, args ...string) []byte {
	s.t.Helper()
	out, stderr, err := s.try(name, args...)
	if err != nil {
		s.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return out
}

// try runs one of the commands to completion and returns its stdout,
// stderr and exit error.
func (s *stack) try(name string, args ...string) ([]byte, string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir, cmd.SysProcAttr = "/", s.procAttr(commandDaemon[name])
	err := cmd.Run()
	return stdout.Bytes(), stderr.String(), err
}

// daemon is one of the three, running or killed.
type daemon struct {
	name   string
	cmd    *exec.Cmd
	log    *os.File
	ended  chan struct{} // closed once the process has exited and been reaped
	err    error         // its exit error, once ended
	killed atomic.Bool   // the harness killed or stopped it
}

// daemonNames are the three daemons in start order.
var daemonNames = []string{"app", "host", "ctl"}

// start starts the named daemon and returns once it is ready: READY=1
// from its own pid on its NOTIFY_SOCKET for the host and the controller,
// the "ready PATH" line on stdout for the appliance (which does not
// notify).
func (s *stack) start(name string, generation int) *daemon {
	s.t.Helper()
	var cmd *exec.Cmd
	var notify *notifytest.Socket
	switch name {
	case "app":
		cmd = exec.Command(filepath.Join(s.bin, "steward-appliance"), "serve", "--socket", s.appSocket, "--state", s.appState)
	case "host":
		cmd, notify = exec.Command(filepath.Join(s.bin, "steward-operator"), "serve", "--store", s.store), s.hostNotify
	case "ctl":
		cmd, notify = exec.Command(filepath.Join(s.bin, "steward-controller"), "serve", "--config", s.ctlConfig), s.ctlNotify
	}
	log, err := os.Create(filepath.Join(s.dir, "log", fmt.Sprintf("%s.%d.log", name, generation)))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if notify != nil {
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+notify.Path)
	}
	cmd.Stderr = log
	cmd.Dir, cmd.SysProcAttr = "/", s.procAttr(name)
	var stdout *bufio.Reader
	if notify == nil {
		p, err := cmd.StdoutPipe()
		if err != nil {
			s.t.Fatal(err)
		}
		stdout = bufio.NewReader(p)
	} else {
		cmd.Stdout = log
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	d := &daemon{name: name, cmd: cmd, log: log, ended: make(chan struct{})}
	if notify == nil {
		line, err := stdout.ReadString('\n')
		if !strings.HasPrefix(line, "ready ") {
			s.t.Fatalf("steward-appliance: no ready line (%q, %v); see %s", line, err, log.Name())
		}
	} else {
		deadline := time.Now().Add(readyWithin)
		for {
			// Messages of an earlier, killed process may still be
			// queued: only the new pid's READY counts.
			m, pid := notify.Next(s.t, time.Until(deadline))
			if int(pid) == cmd.Process.Pid && strings.Contains(m, "READY=1") {
				break
			}
		}
	}
	// Reaped only now: Wait closes the stdout pipe the ready line came on.
	go func() {
		d.err = cmd.Wait()
		log.Close()
		close(d.ended)
	}()
	return d
}

// kill SIGKILLs the daemon and waits until it is reaped.
func (d *daemon) kill() {
	d.killed.Store(true)
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.ended
}

// stop asks the daemon to stop (SIGTERM) and waits for it, returning its
// exit error.
func (d *daemon) stop() error {
	d.killed.Store(true)
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.ended
	return d.err
}
