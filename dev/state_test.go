package dev

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tempStateRE finds the temporary state directory Run announces.
var tempStateRE = regexp.MustCompile(`a temporary state directory (\S+) for this run`)

// runOnceNoState runs --once without --state and returns its output and
// the temporary state directory it announced.
func runOnceNoState(t *testing.T, keep bool) (string, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, Options{Once: true, Keep: keep, Stdout: &out, Logger: quietLogger()}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	m := tempStateRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no temporary state directory announced:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "receipts verified.") {
		t.Errorf("no verified receipts:\n%s", out.String())
	}
	return out.String(), m[1]
}

// --once without --state runs in a new temporary directory under $TMPDIR,
// never touches the default state, and removes the directory (and the
// sockets' one) when done; --keep keeps the state.
func TestRunOnceTemporaryState(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	def, _ := DefaultStateDir()
	out, state := runOnceNoState(t, false)
	if filepath.Dir(state) != tmp {
		t.Errorf("temporary state %s is not in $TMPDIR %s", state, tmp)
	}
	if !strings.Contains(out, "steward-dev: removed the temporary state directory "+state+"\n") {
		t.Errorf("no removal said:\n%s", out)
	}
	if _, err := os.Lstat(state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary state after the run: %v", err)
	}
	if _, err := os.Lstat(def); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the default state %s was touched: %v", def, err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in $TMPDIR: %v", left)
	}
	if left, _ := os.ReadDir(os.Getenv("XDG_RUNTIME_DIR")); len(left) != 0 {
		t.Errorf("left in $XDG_RUNTIME_DIR: %v", left)
	}

	out, state = runOnceNoState(t, true)
	if !strings.Contains(out, "steward-dev: kept the temporary state directory "+state+" (--keep)\n") {
		t.Errorf("no keep said:\n%s", out)
	}
	l, err := NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	checkStopped(t, l)
	checkSegmentSizes(t, l)
	if _, err := os.Lstat(def); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the default state %s was touched: %v", def, err)
	}
}

// serveUntil runs the dev mode without Once until it serves, runs check
// against it and stops it, and returns what it printed.
func serveUntil(t *testing.T, opts Options, check func(l Layout)) string {
	t.Helper()
	out := &signalWriter{text: "steward-dev: serving", ready: make(chan struct{})}
	opts.Stdout, opts.Logger = out, quietLogger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("Run returned before serving: %v\n%s", err, out.String())
	case <-time.After(time.Minute):
		t.Fatalf("not serving within a minute:\n%s", out.String())
	}
	state := opts.State
	if state == "" {
		state, _ = DefaultStateDir()
	}
	l, err := NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	check(l)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of its context ending")
	}
	checkStopped(t, l)
	return out.String()
}

// demoWhileServing runs the demonstration against a serving stack.
func demoWhileServing(t *testing.T, l Layout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if receipts, err := demo(ctx, &out, l.MCPSocket, func() (uint64, error) { return purseBalance(l) }); err != nil || len(receipts) != 2 {
		t.Fatalf("demonstration while serving: %v (receipts %q)\n%s", err, receipts, out.String())
	}
}

// Without --state every start uses the one default state directory and
// a restart reuses it: nothing is provisioned again and the purse keeps
// its history. Its sockets are in $XDG_RUNTIME_DIR/steward-dev.
func TestRunDefaultStateReused(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	def, _ := DefaultStateDir()
	first := serveUntil(t, Options{}, func(l Layout) {
		if want := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "steward-dev"); l.Run != want {
			t.Errorf("sockets in %s, want %s", l.Run, want)
		}
		demoWhileServing(t, l)
	})
	for _, want := range []string{"steward-dev: the state directory " + def + " (the default", "created the operator store"} {
		if !strings.Contains(first, want) {
			t.Errorf("first start: no %q in\n%s", want, first)
		}
	}
	second := serveUntil(t, Options{}, func(l Layout) {
		if b, err := purseBalance(l); err != nil || b != InitialFunds-1 {
			t.Errorf("purse after a restart: %d, %v", b, err)
		}
	})
	if !strings.Contains(second, "steward-dev: the state directory "+def+" (the default") || strings.Contains(second, "created") ||
		strings.Contains(second, "funded") {
		t.Errorf("second start did not reuse %s:\n%s", def, second)
	}
	if entries, _ := os.ReadDir(filepath.Dir(def)); len(entries) != 1 {
		t.Errorf("state directories: %v, want only %s", entries, def)
	}
}

// A default state directory that an earlier version filled with one state
// directory per start is used as it is; Run says how many of those are
// left and how to remove them, and removes nothing.
func TestRunNotesEarlierStates(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	def, _ := DefaultStateDir()
	for _, n := range []string{"20260101-120000", "20260101-120000-2", "unrelated"} {
		if err := os.MkdirAll(filepath.Join(def, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := chooseState(&out, Options{}); err != nil {
		t.Fatal(err)
	}
	want := "steward-dev: " + def + " also holds 2 state directories of earlier versions (named by their start time, up to 193 MB each), no longer used; stopped, `rm -rf " + def + "/20*-*` removes them\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
	if entries, _ := os.ReadDir(def); len(entries) != 3 {
		t.Errorf("entries after the note: %v", entries)
	}
}

// longDir makes a directory whose path is exactly n bytes long (under
// testRoot, which is short whatever $TMPDIR is).
func longDir(t *testing.T, n int) string {
	t.Helper()
	base, err := os.MkdirTemp(testRoot, "long")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, strings.Repeat("h", n-len(base)-1))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if len(dir) != n {
		t.Fatalf("%d bytes, want %d", len(dir), n)
	}
	return dir
}

// With HOME and TMPDIR of 150 bytes and neither XDG_STATE_HOME nor
// XDG_RUNTIME_DIR, the whole stack runs: the default state under HOME
// (served, called, restarted) and --once in a temporary state under
// TMPDIR, with every socket in the per-UID directory of tmpRoot.
func TestRunLongHomeAndTmpdir(t *testing.T) {
	home, tmp := longDir(t, 150), longDir(t, 150)
	t.Setenv("HOME", home)
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	def, _ := DefaultStateDir()
	if def != filepath.Join(home, ".local", "state", "steward-dev") {
		t.Fatalf("default state %s", def)
	}
	sockets := filepath.Join(tmpRoot, "steward-dev-"+strconv.Itoa(os.Getuid()))
	serveUntil(t, Options{}, func(l Layout) {
		if l.Run != sockets {
			t.Errorf("sockets in %s, want %s", l.Run, sockets)
		}
		if fi, err := os.Lstat(l.Run); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("socket directory: %v %v", fi, err)
		}
		demoWhileServing(t, l)
	})
	again := serveUntil(t, Options{}, func(l Layout) {
		if b, err := purseBalance(l); err != nil || b != InitialFunds-1 {
			t.Errorf("purse after a restart: %d, %v", b, err)
		}
	})
	if strings.Contains(again, "created") {
		t.Errorf("the restart provisioned again:\n%s", again)
	}
	_, state := runOnceNoState(t, false)
	if filepath.Dir(state) != tmp {
		t.Errorf("temporary state %s not in TMPDIR", state)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
	if left, _ := os.ReadDir(tmpRoot); len(left) != 0 {
		t.Errorf("left in the sockets' root %s: %v", tmpRoot, left)
	}
	l, _ := NewLayout(def)
	if b, err := purseBalance(l); err != nil || b != InitialFunds-1 {
		t.Errorf("the default state's purse after --once: %d, %v", b, err)
	}
}
