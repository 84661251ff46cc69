package controller

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runCLI runs one steward-controller command in this process.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = (&CLI{Stdout: &out, Stderr: &errb}).Main(args)
	return code, out.String(), errb.String()
}

// TestCLIUsageAndExitCodes checks --help, every usage refusal (exit 2,
// nothing on stdout), a refused config (exit 2) and a failure (exit 1).
func TestCLIUsageAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	badCfg := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badCfg, []byte(`{"name": "dev", "nope": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, ExitRefused, "steward-controller keys init --dir DIR", "steward-controller: usage"},
		{[]string{"--help"}, ExitOK, "steward-controller journal inspect --config FILE", ""},
		{[]string{"help"}, ExitOK, "steward-controller mcp --socket PATH", ""},
		{[]string{"serve", "--help"}, ExitOK, "usage of steward-controller serve:\n  -config string", ""},
		{[]string{"attempts", "list", "-h"}, ExitOK, "-json", ""},
		{[]string{"frobnicate"}, ExitRefused, "", `usage: unknown command "frobnicate"`},
		{[]string{"keys"}, ExitRefused, "", "usage: keys init --dir DIR"},
		{[]string{"keys", "init"}, ExitRefused, "", "usage: --dir is required"},
		{[]string{"serve"}, ExitRefused, "", "usage: --config is required"},
		{[]string{"serve", "--config", badCfg, "extra"}, ExitRefused, "", `usage: unexpected arguments ["extra"]`},
		{[]string{"serve", "--nope"}, ExitRefused, "", "usage: flag provided but not defined: -nope"},
		{[]string{"serve", "--config", badCfg, "--snapshot-every", "0"}, ExitRefused, "", "usage: --snapshot-every 0: a snapshot is made after at least 1 record"},
		{[]string{"mcp"}, ExitRefused, "", "usage: --socket is required"},
		{[]string{"attempts"}, ExitRefused, "", "usage: attempts list|inspect|resolve"},
		{[]string{"attempts", "forget"}, ExitRefused, "", "usage: attempts list|inspect|resolve"},
		{[]string{"attempts", "inspect", "--config", badCfg}, ExitRefused, "", "usage: attempts inspect ID --config FILE"},
		{[]string{"journal"}, ExitRefused, "", "usage: journal inspect --config FILE"},
		{[]string{"serve", "--config", badCfg}, ExitRefused, "", "controller config refused"},
		{[]string{"journal", "inspect", "--config", filepath.Join(dir, "absent.json")}, ExitRefused, "", "controller config refused"},
		{[]string{"keys", "init", "--dir", filepath.Join(badCfg, "keys")}, ExitFailure, "", "steward-controller: keys init: mkdir " + badCfg + ": not a directory"},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) ||
			(tc.stdout == "" && stdout != "") || (tc.stderr == "" && stderr != "") {
			t.Errorf("%q: exit %d (want %d)\nstdout: %s\nstderr: %s", tc.args, code, tc.code, stdout, stderr)
		}
	}
}

// TestCLIKeysInit prints the public keys file's path.
func TestCLIKeysInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	code, stdout, stderr := runCLI("keys", "init", "--dir", dir)
	if want := filepath.Join(dir, PublicKeysFile) + "\n"; code != ExitOK || stdout != want || stderr != "" {
		t.Fatalf("exit %d stdout %q (want %q) stderr %q", code, stdout, want, stderr)
	}
}

// hookLog records the systemd hooks a CLI calls.
type hookLog struct {
	mu       sync.Mutex
	ready    []string
	health   func() error
	ready1   chan struct{}
	stopping chan struct{}
}

func (h *hookLog) cli(out, errb *bytes.Buffer, listeners func() (map[string]*net.UnixListener, error)) *CLI {
	return &CLI{Stdout: out, Stderr: errb, Listeners: listeners,
		Ready: func(extra ...string) error {
			h.mu.Lock()
			h.ready = append(h.ready, extra...)
			h.mu.Unlock()
			close(h.ready1)
			return errors.New("no NOTIFY_SOCKET here")
		},
		Watchdog: func(ctx context.Context, health func() error) (time.Duration, error) {
			h.mu.Lock()
			h.health = health
			h.mu.Unlock()
			return 0, nil
		},
		Stopping: func() error { close(h.stopping); return nil },
	}
}

// TestCLIServeHooks runs `serve` in this process: it asks Listeners for
// the passed sockets, calls Ready with STATUS=serving (logging, not
// failing on, its error), hands Watchdog a health check that passes, and
// on SIGTERM calls Stopping and exits 0.
func TestCLIServeHooks(t *testing.T) {
	s := newStack(t, stackOpts{})
	h := &hookLog{ready1: make(chan struct{}), stopping: make(chan struct{})}
	var out, errb bytes.Buffer
	asked := false
	cli := h.cli(&out, &errb, func() (map[string]*net.UnixListener, error) { asked = true; return nil, nil })
	done := make(chan int, 1)
	go func() { done <- cli.Main([]string{"serve", "--config", s.cfgPath}) }()
	select {
	case <-h.ready1:
	case code := <-done:
		t.Fatalf("serve exited %d before Ready: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve not ready within 30 s")
	}
	if _, err := os.Stat(s.cfg.Sockets.MCP); err != nil {
		t.Fatalf("Ready before the MCP socket was bound: %v", err)
	}
	// The signal context is registered before Ready: SIGTERM reaches it,
	// not the default action.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("serve exit %d: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s of SIGTERM")
	}
	select {
	case <-h.stopping:
	case <-time.After(10 * time.Second):
		t.Fatal("Stopping not called after SIGTERM")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !asked || len(h.ready) != 1 || h.ready[0] != "STATUS=serving" || h.health == nil {
		t.Fatalf("listeners asked %v, ready %q, health %v", asked, h.ready, h.health != nil)
	}
	if err := h.health(); err != nil {
		t.Fatalf("health of a clean journal: %v", err)
	}
	if !strings.Contains(errb.String(), `msg="sd_notify READY" err="no NOTIFY_SOCKET here"`) {
		t.Fatalf("Ready's error not logged:\n%s", errb.String())
	}
}

// TestCLIServeListenersFail: an error from socket activation is a
// failure (exit 1) before anything is opened.
func TestCLIServeListenersFail(t *testing.T) {
	dir := t.TempDir()
	h := &hookLog{ready1: make(chan struct{}), stopping: make(chan struct{})}
	var out, errb bytes.Buffer
	cli := h.cli(&out, &errb, func() (map[string]*net.UnixListener, error) {
		return nil, errors.New("LISTEN_FDS=3 but LISTEN_FDNAMES names 2")
	})
	code := cli.Main([]string{"serve", "--config", filepath.Join(dir, "c.json")})
	if code != ExitFailure || errb.String() != "steward-controller: LISTEN_FDS=3 but LISTEN_FDNAMES names 2\n" {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("serve wrote %v", entries)
	}
}
