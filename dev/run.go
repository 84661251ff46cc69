package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/stewardrt/steward/appliance"
	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/operator"
)

// Options configure one run of the dev mode.
type Options struct {
	// State is the state directory; empty means a fresh directory under the
	// user's state dir (see DefaultStateBase), which Run announces.
	State string
	// Once runs the demonstration through the MCP socket, verifies the
	// receipts, shuts down and returns, instead of serving until ctx ends.
	Once bool
	// Stdout receives what a user reads: where things are, the MCP client
	// configuration, the demonstration. Nil means io.Discard.
	Stdout io.Writer
	// Logger receives the three daemons' logs, each with a "part"
	// attribute. Nil means slog.Default().
	Logger *slog.Logger
}

// startTimeout bounds how long the three daemons may take to be ready.
const startTimeout = 30 * time.Second

// demoTimeout bounds the whole demonstration.
const demoTimeout = 60 * time.Second

// Run runs the dev mode: it provisions the state directory (first start) or
// reuses it (later starts), starts the reference appliance, the host
// (operator.Serve) and the controller (controller.Serve) in this process,
// each on its own state directory, journal and sockets, talking over the
// same Unix sockets and signed frames as in production, writes STATE/dev.json
// and prints the MCP client configuration. Without Once it serves until ctx
// ends; then, and after the demonstration with Once, it shuts the three down
// cleanly (journals closed, sockets removed) and returns.
func Run(ctx context.Context, opts Options) error {
	w := opts.Stdout
	if w == nil {
		w = io.Discard
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	state := opts.State
	if state == "" {
		var err error
		if state, err = FreshStateDir(); err != nil {
			return err
		}
		fmt.Fprintf(w, "steward-dev: a fresh state directory %s (pass --state %s to start it again)\n", state, state)
	}
	l, err := NewLayout(state)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "steward-dev: DEVELOPMENT MODE. The host, the controller and the reference appliance run in this one\n"+
		"process as one account (uid %d), with every key on local disk under %s.\n"+
		"In production each runs as its own account and no side can read the other's keys.\n", os.Getuid(), l.State)
	if err := provision(l, w); err != nil {
		return fmt.Errorf("steward-dev: provisioning %s: %w", l.State, err)
	}

	st, err := start(ctx, l, log)
	if err != nil {
		return err
	}
	if err := l.writeManifest(); err != nil {
		st.stop()
		return err
	}
	printReady(w, l)

	var demoErr error
	var receipts []string
	if opts.Once {
		dctx, cancel := context.WithTimeout(ctx, demoTimeout)
		receipts, demoErr = demo(dctx, w, l.MCPSocket, func() (uint64, error) { return purseBalance(l) })
		cancel()
	} else {
		fmt.Fprintf(w, "\nsteward-dev: serving; interrupt (Ctrl-C) to stop.\n")
		select {
		case <-ctx.Done():
		case err := <-st.failed:
			st.stop()
			return err
		}
	}
	stopErr := errors.Join(st.stop(), l.checkSocketsRemoved())
	if stopErr == nil {
		fmt.Fprintf(w, "\nsteward-dev: stopped: journals closed, sockets removed.\n")
	}
	if err := errors.Join(demoErr, stopErr); err != nil {
		return err
	}
	if opts.Once {
		return verify(w, l, receipts)
	}
	return nil
}

// FreshStateDir creates a new directory under DefaultStateBase, named by
// the UTC time of day it was made (a -N suffix when that name is taken): short,
// because the socket paths under it must fit a Unix socket address.
func FreshStateDir() (string, error) {
	base, err := DefaultStateBase()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	name := time.Now().UTC().Format("20060102-150405")
	for i := 1; ; i++ {
		dir := filepath.Join(base, name)
		if i > 1 {
			dir += "-" + strconv.Itoa(i)
		}
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) || i >= 1000 {
			return "", err
		}
	}
}

// DefaultStateBase is where fresh state directories go:
// $XDG_STATE_HOME/steward-dev, or ~/.local/state/steward-dev.
func DefaultStateBase() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "steward-dev"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("steward-dev: no --state and no home directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "steward-dev"), nil
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
			return appliance.Serve(ctx, appliance.Config{Socket: l.ApplianceSocket, State: l.Appliance, Logger: log, Ready: readyWriter(ready)})
		}},
		{"host", func(ctx context.Context, ready func(), log *slog.Logger) error {
			return operator.Serve(ctx, l.OperatorStore, operator.ServeOptions{Ready: ready, Logger: log})
		}},
		{"controller", func(ctx context.Context, ready func(), log *slog.Logger) error {
			return controller.Serve(ctx, l.Config, controller.Options{Ready: ready, Logger: log})
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
