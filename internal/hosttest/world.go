package hosttest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/host"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// World is a store with one controller (ctl, this process's uid), a funded
// purse, a grant and a route (r1, to application app), the application
// and the controller's peer.
type World struct {
	Dir, Store string
	App        *peertest.App
	Peer       *peertest.Peer
	Pub        *wire.HybridPublicKey
	Route      views.RouteRequest
	Grant      string
	Stop       func()           // stops the in-process host
	Now        func() time.Time // the host's wall clock when set (ServeOptions.Now)
	Log        *slog.Logger     // the host's logger when set (ServeOptions.Logger)
	Host       *host.Host       // the in-process host while it serves
	// Approvals and Approvers are the approvals socket and its group
	// when set (ServeOptions.ApprovalsSocket, ApproversGroup).
	Approvals, Approvers string
	// SnapshotEvery is the host's snapshot interval when set
	// (ServeOptions.SnapshotEvery).
	SnapshotEvery uint64
	// AskBounds are the host's caps on pending asks when set
	// (ServeOptions.AskBounds).
	AskBounds views.AskBounds
}

// Opts shape a World.
type Opts struct {
	Fund                  uint64
	Price, DiscoveryPrice uint64
	RefusalPrice          uint64
	PerDay                uint64 // 1000 when 0
	Ops                   []string
	NoGrant, NoApp        bool
	StoreIn               string // the store's parent directory (a small tmpfs, say); the world's dir when empty
	SegmentSize           int64  // the host journal's segment size; the journal's default when 0
}

// NewWorld makes a World as o shapes it, its store closed.
func NewWorld(t testing.TB, o Opts) *World {
	w := &World{Dir: peertest.ShortDir(t)}
	w.Store = filepath.Join(w.Dir, "store")
	if o.StoreIn != "" {
		w.Store = filepath.Join(o.StoreIn, "store")
	}
	pub, err := operator.InitWith(w.Store, operator.InitOptions{JournalSegmentSize: o.SegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	w.Pub = pub
	if !o.NoApp {
		w.App = peertest.StartApp(t, w.Dir)
	}
	w.Peer = peertest.NewPeer(t, "ctl")
	w.Peer.ListenReverse(t, filepath.Join(w.Dir, "rev.sock"), pub)
	s, err := operator.Open(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddController("ctl", uint32(os.Geteuid()), w.Peer.KeysFile(), filepath.Join(w.Dir, "control.sock")); err != nil {
		t.Fatal(err)
	}
	if o.Fund > 0 {
		if _, err := s.FundPurse("ctl", o.Fund); err != nil {
			t.Fatal(err)
		}
	}
	if o.PerDay == 0 {
		o.PerDay = 1000
	}
	if !o.NoGrant {
		g, err := s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "app", Operations: o.Ops, Price: o.Price,
			DiscoveryPrice: o.DiscoveryPrice, RefusalPrice: o.RefusalPrice, PerDay: o.PerDay, NotAfter: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		w.Grant = g.ID
	}
	w.Route = views.RouteRequest{Controller: "ctl", Upstream: filepath.Join(w.Dir, "app.sock"), Forward: filepath.Join(w.Dir, "fwd.sock"),
		Reverse: filepath.Join(w.Dir, "rev.sock"), Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 5000}}
	if _, err := s.RegisterRoute("r1", "app", w.Route); err != nil {
		t.Fatal(err)
	}
	return w
}

// Serve runs the host in process until Stop is called or the test ends.
func (w *World) Serve(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	opts := host.ServeOptions{Ready: func() { close(ready) }, Now: w.Now, Logger: w.Log, Started: func(h *host.Host) { w.Host = h },
		ApprovalsSocket: w.Approvals, ApproversGroup: w.Approvers, SnapshotEvery: w.SnapshotEvery, AskBounds: w.AskBounds}
	if _, bench := t.(*testing.B); bench {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) // keep benchmark output parseable
	}
	go func() { done <- host.Serve(ctx, w.Store, opts) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("serve: not ready within 20s")
	}
	var once sync.Once
	w.Stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(w.Stop)
}

// HostStore is the store of the in-process host while it serves.
func (w *World) HostStore() *operator.Store { return w.Host.Store() }

// Dial opens a forward channel to the world's route.
func (w *World) Dial(t testing.TB) *wire.Client { return w.Peer.Dial(t, w.Route.Forward, w.Pub) }

// WithStore opens the (stopped) store for a check.
func (w *World) WithStore(t testing.TB, fn func(s *operator.Store)) {
	t.Helper()
	s, err := operator.Open(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fn(s)
}
