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
	bin        string // directory of the three commands
	dir        string // everything else
	store      string // the host's store
	ctlConfig  string // the controller's config
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
	s := &stack{t: t, dir: dir, bin: filepath.Join(dir, "bin"),
		store: filepath.Join(dir, "op"), ctlConfig: filepath.Join(dir, "controller.json"),
		appState: filepath.Join(dir, "app"), appSocket: filepath.Join(dir, "run", "app.sock"),
		mcpSocket:  filepath.Join(dir, "run", "mcp.sock"),
		hostNotify: notifytest.Listen(t), ctlNotify: notifytest.Listen(t)}
	for _, d := range []string{s.bin, filepath.Join(dir, "run"), filepath.Join(dir, "log")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	buildCommands(t, s.bin)
	uid := strconv.Itoa(os.Getuid())
	keys := filepath.Join(dir, "ctl", "keys")
	route := filepath.Join(dir, "route.json")
	s.write(route, fmt.Sprintf(`{"controller": "dev", "upstream": %q, "forward": %q, "reverse": %q,
  "prefix": "/v1", "timeouts": {"connectMs": 2000, "responseMs": 30000}}`,
		s.appSocket, filepath.Join(dir, "run", "fwd.sock"), filepath.Join(dir, "run", "reverse.sock")))
	s.write(s.ctlConfig, fmt.Sprintf(`{
  "name": "dev", "stateDir": %q, "keyDir": %q, "bundle": %q,
  "sockets": {"mcp": %q, "reverse": %q, "foreground": %q},
  "agents": {"uids": [%s], "gids": []},
  "foregroundUids": [%s],
  "allowedApplicationLifetimeRoutes": ["appliance"],
  "payer": {"maxPerCall": 100, "perDay": %d},
  "toolTask": {"applicationServices": [{"application": "appliance", "protocol": "oracle-operations-v1"}]}
}`, filepath.Join(dir, "ctl", "state"), keys, filepath.Join(dir, "ctl", "host.bundle"),
		s.mcpSocket, filepath.Join(dir, "run", "reverse.sock"), filepath.Join(dir, "run", "foreground.sock"),
		uid, uid, int64(funded)))
	s.run("steward-controller", "keys", "init", "--dir", keys)
	s.run("steward-operator", "init", "--store", s.store)
	s.run("steward-operator", "controller", "add", "dev", "--uid", uid, "--keys", filepath.Join(keys, "controller.pub"), "--store", s.store)
	s.run("steward-operator", "purse", "fund", "dev", strconv.Itoa(funded), "--store", s.store)
	s.run("steward-operator", "grant", "issue", "--controller", "dev", "--application", "appliance",
		"--price", strconv.Itoa(price), "--per-day", "1000000000", "--not-after", "+24h", "--store", s.store)
	s.run("steward-operator", "route", "register", "appliance", "appliance", route, "--store", s.store)
	s.run("steward-operator", "bundle", "build", "dev", "--out", filepath.Join(dir, "ctl", "host.bundle"), "--store", s.store)
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
