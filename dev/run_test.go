package dev

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// TestProvisionReuses: the second start provisions nothing and the purse,
// grant, route and config are as the first start left them.
func TestProvisionReuses(t *testing.T) {
	l, err := NewLayout(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := provision(l, &first); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"created the operator store", "created the controller's keys", "pinned controller dev",
		"funded purse dev with 1000000 credits", "at 1 credit a call, 100000 calls a day", "registered route appliance revision 1",
		"wrote the controller config"} {
		if !strings.Contains(first.String(), want) {
			t.Errorf("first start: no %q in\n%s", want, first.String())
		}
	}
	cfg, err := os.ReadFile(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := provision(l, &second); err != nil {
		t.Fatal(err)
	}
	if second.Len() != 0 {
		t.Errorf("second start provisioned again:\n%s", second.String())
	}
	if again, _ := os.ReadFile(l.Config); !bytes.Equal(again, cfg) {
		t.Errorf("the config changed:\n%s\n%s", cfg, again)
	}
	st, err := operator.OpenReadOnly(l.OperatorStore)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.PurseShow(ControllerName)
	if err != nil || p.Funded != InitialFunds || p.Balance != InitialFunds {
		t.Errorf("purse after two starts: %+v %v", p, err)
	}
	if g := st.Grants(); len(g) != 1 || g[0].Price != Price || g[0].PerDay != PerDay || g[0].Application != Application {
		t.Errorf("grants after two starts: %+v", g)
	}
	if r := st.Routes(); len(r) != 1 || r[0].Revision != 1 || r[0].Forward != l.ForwardSocket {
		t.Errorf("routes after two starts: %+v", r)
	}
}

// TestProvisionRefusesMovedState: the route record is signed with the
// socket paths and the controller's journal is bound to its config, so a
// state directory that moved is refused, not silently re-provisioned.
func TestProvisionRefusesMovedState(t *testing.T) {
	base := t.TempDir()
	l, _ := NewLayout(filepath.Join(base, "a"))
	if err := provision(l, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(l.State, filepath.Join(base, "b")); err != nil {
		t.Fatal(err)
	}
	moved, _ := NewLayout(filepath.Join(base, "b"))
	err := provision(moved, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "the state directory was moved or changed") {
		t.Fatalf("provision of a moved state: %v", err)
	}
}

// TestRunOnce runs the whole dev mode in this process: provision, the three
// daemons, the demonstration through the MCP socket, the clean stop and the
// receipts verified.
func TestRunOnce(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s")
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, Options{State: state, Once: true, Stdout: &out, Logger: quietLogger()}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"DEVELOPMENT MODE",
		`"--socket",`,
		"operations: calc.evaluate",
		`"fraction":"2748/487"`,
		"purse balance: 999999 credits (charged 1)",
		"replayed true",
		"charged 0: replayed from the journal",
		"sockets removed",
		"2 receipts, ",
		"purse dev: funded 1000000, charged 1, balance 999999, 2 receipts",
		"receipts verified.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, out.String())
		}
	}
	l, _ := NewLayout(state)
	checkStopped(t, l)
	if _, err := os.Stat(l.ManifestPath()); err != nil {
		t.Error(err)
	}
	checkSegmentSizes(t, l)
}

// checkStopped checks that a stopped stack left no socket and no socket
// directory.
func checkStopped(t *testing.T, l Layout) {
	t.Helper()
	for _, s := range l.sockets() {
		if _, err := os.Lstat(s); err == nil {
			t.Errorf("socket %s left after the stop", s)
		}
	}
	if _, err := os.Lstat(l.Run); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket directory %s after the stop: %v", l.Run, err)
	}
}

// checkSegmentSizes checks that each of the three journals records the dev
// mode's segment size and preallocated a segment of it.
func checkSegmentSizes(t *testing.T, l Layout) {
	t.Helper()
	for _, dir := range []string{filepath.Join(l.OperatorStore, "journal"), filepath.Join(l.Controller, "journal"), filepath.Join(l.Appliance, "journal")} {
		sum, err := journal.Inspect(dir)
		if err != nil {
			t.Fatal(err)
		}
		if sum.SegmentSize != JournalSegmentSize || len(sum.Segments) != 1 || sum.Segments[0].Size != JournalSegmentSize {
			t.Errorf("%s: segment size %d, segments %+v; want one of %d", dir, sum.SegmentSize, sum.Segments, JournalSegmentSize)
		}
	}
}

// signalWriter closes ready the first time the output contains text.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	text  string
	ready chan struct{}
	once  sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.text) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRunServesUntilCancelled: without Once, Run serves (an agent's call
// goes through the MCP socket named in dev.json) until its context ends,
// then stops cleanly.
func TestRunServesUntilCancelled(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s")
	out := &signalWriter{text: "steward-dev: serving", ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{State: state, Stdout: out, Logger: quietLogger()}) }()
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("Run returned before serving: %v\n%s", err, out.String())
	case <-time.After(time.Minute):
		t.Fatalf("not serving within a minute:\n%s", out.String())
	}
	l, _ := NewLayout(state)
	var demoOut bytes.Buffer
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	receipts, err := demo(cctx, &demoOut, l.MCPSocket, func() (uint64, error) { return purseBalance(l) })
	ccancel()
	if err != nil || len(receipts) != 2 {
		t.Fatalf("demonstration while serving: %v (receipts %q)\n%s", err, receipts, demoOut.String())
	}
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
	if err := verify(io.Discard, l, receipts); err != nil {
		t.Error(err)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage: steward-dev [--state DIR] [--once [--keep]]") {
		t.Errorf("--help: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := Main([]string{"--bogus"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "flag provided but not defined: -bogus") {
		t.Errorf("--bogus: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	errOut.Reset()
	if code := Main([]string{"extra"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unexpected argument "extra"`) {
		t.Errorf("extra argument: exit %d\n%s", code, errOut.String())
	}
	errOut.Reset()
	if code := Main([]string{"--log-level", "loud"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--log-level") {
		t.Errorf("bad log level: exit %d\n%s", code, errOut.String())
	}
	const keepRefused = "steward-dev: --keep keeps the temporary state directory of --once without --state; with --state the state is always kept\n"
	for _, args := range [][]string{{"--keep"}, {"--once", "--keep", "--state", t.TempDir()}} {
		errOut.Reset()
		if code := Main(args, &out, &errOut); code != 2 || !strings.HasPrefix(errOut.String(), keepRefused) {
			t.Errorf("%q: exit %d\n%s", args, code, errOut.String())
		}
	}
}
