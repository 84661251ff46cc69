package host_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/host"
	"github.com/stewardrt/steward/operator/hostlog"
)

// InitWith's JournalSegmentSize is recorded in the host journal, and the
// store keeps it when it is opened with the default.
func TestInitWithJournalSegmentSize(t *testing.T) {
	store := filepath.Join(peertest.ShortDir(t), "store")
	if _, err := operator.InitWith(store, operator.InitOptions{JournalSegmentSize: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	s, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	pub := s.PublicKey()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The host journal as Open opens it: its options name no segment size
	// (the default).
	j, err := journal.Open(filepath.Join(store, hostlog.JournalDir), hostlog.Options(pub))
	if err != nil {
		t.Fatal(err)
	}
	if got := j.SegmentSize(); got != 4<<20 {
		t.Errorf("host journal segment size under the default = %d, want 4 MiB", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := journal.Inspect(filepath.Join(store, hostlog.JournalDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Segments) != 1 || sum.Segments[0].Size != 4<<20 {
		t.Errorf("segments: %+v", sum.Segments)
	}
}

// ServeOptions.AdminSocket binds the admin socket there, not in the store;
// the operator key reaches the daemon through it, and it is gone after the
// daemon stops.
func TestServeAdminSocketOption(t *testing.T) {
	dir := peertest.ShortDir(t)
	store := filepath.Join(dir, "store")
	if _, err := operator.Init(store); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- host.Serve(ctx, store, host.ServeOptions{Ready: func() { close(ready) }, AdminSocket: path,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve: not ready within 20s")
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("admin socket at %s: %v %v", path, fi, err)
	}
	if _, err := os.Lstat(admin.SocketPath(store)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an admin socket in the store too: %v", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	a, err := admin.DialAt(dctx, store, path)
	dcancel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Do(admin.Request{Op: "no-such-op"})
	a.Close()
	if err == nil || !strings.Contains(err.Error(), `unknown admin operation "no-such-op"`) {
		t.Fatalf("the daemon through %s: %v", path, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("admin socket after stop: %v", err)
	}
}
