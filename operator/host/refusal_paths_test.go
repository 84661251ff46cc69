package host

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestInspectRefusalNamesNoPath: an inspect whose attempt the host cannot
// read back (its history index and journal are closed under it) is refused with a text
// that names the failure and no path of the host's; the log has the error.
// Before, the refusal carried the journal's error text, which names its
// directory.
func TestInspectRefusalNamesNoPath(t *testing.T) {
	dir := peertest.ShortDir(t)
	store := filepath.Join(dir, "store")
	// A definite attempt whose outcome record is in the journal: a real
	// dispatch through a host serving the store, which is stopped after.
	definiteAttempt(t, dir, store, "a1")
	s, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	h := &Host{s: s, log: slog.New(slog.NewTextHandler(&log, nil))}
	// Inspect reads the attempt (ended: from the history index) and its
	// outcome (from the journal), both closed now.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	body, err := wire.Marshal(msg.Inspect{Attempt: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	typ, rep := h.routeHandler(operator.ForwardSocket{Route: "r1", Controller: "dev"}).ServeFrame(context.Background(), &wire.Envelope{T: msg.TypeInspect, Body: body})
	ref, ok := rep.(msg.Refusal)
	if typ != msg.TypeRefused || !ok || ref.Code != msg.CodeJournal || ref.Reason != inspectUnreadable {
		t.Fatalf("inspect answered %s %+v, want refused %s %q", typ, rep, msg.CodeJournal, inspectUnreadable)
	}
	if strings.Contains(ref.Reason, dir) {
		t.Fatalf("the refusal names a host path: %q", ref.Reason)
	}
	// A closed index's error names no path itself; what the test shows
	// is that the refusal is the fixed text whatever the error, and that
	// the error goes to the log.
	if !strings.Contains(log.String(), `err="history index: index: closed"`) {
		t.Fatalf("the log lacks the journal's error:\n%s", log.String())
	}
}

// definiteAttempt makes store (under dir) with controller dev (this
// process's uid), a funded purse, a grant and route r1 to the reference
// application, serves it in process for one dispatch, attempt, that the
// application answers (definite), and stops the host.
func definiteAttempt(t *testing.T, dir, store, attempt string) {
	t.Helper()
	pub, err := operator.Init(store)
	if err != nil {
		t.Fatal(err)
	}
	peertest.StartApp(t, dir)
	peer := peertest.NewPeer(t, "dev")
	peer.ListenReverse(t, filepath.Join(dir, "rev.sock"), pub)
	s, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddController("dev", uint32(os.Geteuid()), peer.KeysFile(), filepath.Join(dir, "control.sock")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FundPurse("dev", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueGrant(views.GrantSpec{Controller: "dev", Application: "app", PerDay: 1000, NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	rt := views.RouteRequest{Controller: "dev", Upstream: filepath.Join(dir, "app.sock"), Forward: filepath.Join(dir, "fwd.sock"),
		Reverse: filepath.Join(dir, "rev.sock"), Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 5000}}
	if _, err := s.RegisterRoute("r1", "app", rt); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- Serve(ctx, store, ServeOptions{Ready: func() { close(ready) }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve: not ready within 20s")
	}
	res := peertest.Call(t, peer.Dial(t, rt.Forward, pub), peertest.InvokeDispatch(t, attempt, "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("dispatch %s: %s %d %s (%+v)", attempt, res.Outcome, res.Status, res.Body, res.Refusal)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
