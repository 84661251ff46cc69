package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/stewardrt/steward/appliance"
	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/operator/host"
)

// Options configure one run of the dev mode.
type Options struct {
	// State is the state directory. Empty means DefaultStateDir, which
	// every such start reuses; with Once, a new temporary directory
	// instead, removed when the run ends (unless Keep).
	State string
	// Once runs the demonstration through the MCP socket, verifies the
	// receipts, shuts down and returns, instead of serving until ctx ends.
	Once bool
	// Keep keeps the temporary state directory of Once without State.
	Keep bool
	// Stdout receives what a user reads: where things are, the MCP client
	// configuration, the demonstration. Nil means io.Discard.
	Stdout io.Writer
	// Logger receives the three daemons' logs, each with a "part"
	// attribute. Nil means slog.Default().
	Logger *slog.Logger
	// MCPHTTP has the controller also serve MCP over streamable HTTP, on
	// RUN/mcp-http.sock (config sockets.mcpHTTP), as the tests of clients
	// steward did not write need. It is off by default, as in production
	// (DESIGN.md section 7), and it is part of the controller's config, to
	// which the journal is bound: a state provisioned with it must be
	// started with it, and one without it without it.
	MCPHTTP bool
	// Ready, when set, is called once the three parts serve and dev.json
	// is written, with what dev.json says: a test that runs the stack
	// blocks on it rather than polling for the sockets.
	Ready func(Manifest)
}

// JournalSegmentSize is the segment size of the three journals a dev
// stack creates: each preallocates one segment of it, 4 MiB rather than
// the production 64 MiB. A journal keeps the size it was made with.
const JournalSegmentSize = 4 << 20

// startTimeout bounds how long the three daemons may take to be ready.
const startTimeout = 30 * time.Second

// demoTimeout bounds the whole demonstration.
const demoTimeout = 60 * time.Second

// Run runs the dev mode: it chooses the state directory (Options.State),
// provisions it (first start) or reuses it (later starts), makes the
// sockets' directory, starts the reference appliance, the host
// (host.Serve) and the controller (controller.Serve) in this process,
// each on its own state directory, journal and sockets, talking over the
// same Unix sockets and signed frames as in production, writes
// STATE/dev.json and prints the MCP client configuration. Without Once it
// serves until ctx ends; then, and after the demonstration with Once, it
// shuts the three down cleanly (journals closed, sockets and their
// directory removed), removes a temporary state directory, and returns.
func Run(ctx context.Context, opts Options) error {
	w := opts.Stdout
	if w == nil {
		w = io.Discard
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	state, err := chooseState(w, opts)
	if err != nil {
		return err
	}
	err = runStack(ctx, w, log, state.path, opts)
	return errors.Join(err, state.done(w))
}

// runStack is Run on the chosen state directory.
func runStack(ctx context.Context, w io.Writer, log *slog.Logger, state string, opts Options) error {
	once := opts.Once
	l, err := NewLayout(state)
	if err != nil {
		return err
	}
	if opts.MCPHTTP {
		l = l.WithMCPHTTP()
	}
	fmt.Fprintf(w, "steward-dev: DEVELOPMENT MODE. The host, the controller and the reference appliance run in this one\n"+
		"process as one account (uid %d), with every key on local disk under %s.\n"+
		"In production each runs as its own account and no side can read the other's keys.\n", os.Getuid(), l.State)
	created, err := l.ensureSocketDir()
	if err != nil {
		if created {
			os.Remove(l.Run)
		}
		return fmt.Errorf("steward-dev: %w", err)
	}
	if err := provision(l, w); err != nil {
		if created {
			os.Remove(l.Run)
		}
		return fmt.Errorf("steward-dev: provisioning %s: %w", l.State, err)
	}

	st, err := start(ctx, l, log)
	if err != nil {
		return errors.Join(err, l.removeSocketDir())
	}
	if err := l.writeManifest(); err != nil {
		return errors.Join(err, st.stop(), l.removeSocketDir())
	}
	printReady(w, l)
	if opts.Ready != nil {
		opts.Ready(l.manifest())
	}

	var demoErr error
	var receipts []string
	if once {
		dctx, cancel := context.WithTimeout(ctx, demoTimeout)
		receipts, demoErr = demo(dctx, w, l.MCPSocket, func() (uint64, error) { return purseBalance(l) })
		cancel()
	} else {
		fmt.Fprintf(w, "\nsteward-dev: serving; interrupt (Ctrl-C) to stop.\n")
		select {
		case <-ctx.Done():
		case err := <-st.failed:
			return errors.Join(err, st.stop(), l.removeSocketDir())
		}
	}
	stopErr := errors.Join(st.stop(), l.removeSocketDir())
	if stopErr == nil {
		fmt.Fprintf(w, "\nsteward-dev: stopped: journals closed, sockets removed.\n")
	}
	if err := errors.Join(demoErr, stopErr); err != nil {
		return err
	}
	if once {
		return verify(w, l, receipts)
	}
	return nil
}

// stack is the three running daemons.
type stack struct {
	cancel []context.CancelFunc // one per daemon, in start order
	done   []<-chan error
	failed chan error // a daemon that stopped on its own
	once   sync.Once
	err    error
}

// start starts the appliance, the host and the controller, each waiting for
// the one before it to be ready (sockets bound, journal open).
func start(parent context.Context, l Layout, log *slog.Logger) (*stack, error) {
	s := &stack{failed: make(chan error, 3)}
	parts := []struct {
		name  string
		serve func(ctx context.Context, ready func(), log *slog.Logger) error
	}{
		{"appliance", func(ctx context.Context, ready func(), log *slog.Logger) error {
			return appliance.Serve(ctx, appliance.Config{Socket: l.ApplianceSocket, State: l.Appliance, Logger: log, Ready: readyWriter(ready),
				JournalSegmentSize: JournalSegmentSize})
		}},
		{"host", func(ctx context.Context, ready func(), log *slog.Logger) error {
			return host.Serve(ctx, l.OperatorStore, host.ServeOptions{Ready: ready, Logger: log, AdminSocket: l.AdminSocket})
		}},
		{"controller", func(ctx context.Context, ready func(), log *slog.Logger) error {
			return controller.Serve(ctx, l.Config, controller.Options{Ready: ready, Logger: log, JournalSegmentSize: JournalSegmentSize})
		}},
	}
	for _, p := range parts {
		ctx, cancel := context.WithCancel(parent)
		s.cancel = append(s.cancel, cancel)
		ready := make(chan struct{})
		var readyOnce sync.Once
		done := make(chan error, 1)
		go func() {
			err := p.serve(ctx, func() { readyOnce.Do(func() { close(ready) }) }, log.With("part", p.name))
			if err != nil {
				err = fmt.Errorf("steward-dev: %s: %w", p.name, err)
			} else if ctx.Err() == nil {
				err = fmt.Errorf("steward-dev: %s stopped on its own", p.name)
			}
			if ctx.Err() == nil {
				s.failed <- err
			}
			done <- err
		}()
		s.done = append(s.done, done)
		select {
		case <-ready:
		case err := <-done:
			s.done[len(s.done)-1] = closedWith(err)
			s.stop()
			return nil, err
		case <-time.After(startTimeout):
			s.stop()
			return nil, fmt.Errorf("steward-dev: %s not ready after %v", p.name, startTimeout)
		}
	}
	return s, nil
}

// stop shuts the daemons down one at a time in the reverse of the start
// order: the controller first, so no new call comes in, then the host, then
// the appliance. Each returns once its journal is closed and its sockets are
// removed.
func (s *stack) stop() error {
	s.once.Do(func() {
		var errs []error
		for i := len(s.done) - 1; i >= 0; i-- {
			s.cancel[i]()
			if err := <-s.done[i]; err != nil {
				errs = append(errs, err)
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

func closedWith(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

// readyWriter adapts a ready callback to the appliance's Ready writer,
// which receives one line once the appliance serves.
type readyWriter func()

func (f readyWriter) Write(p []byte) (int, error) {
	f()
	return len(p), nil
}
