package histbench

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
	"time"

	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/operator/admin"
)

// day is one step of the generator daemons' clock.
const day = 24 * time.Hour

// stack is the three daemons the generator runs on a dev state, each a
// child process.
type stack struct {
	l        dev.Layout
	self     string // the histgen binary: its daemon modes
	appBin   string // steward-appliance
	logDir   string
	offsetMs int64 // the daemons' clock offset, days ahead of the machine's
	app      *child
	host     *child
	ctl      *child
}

// provision makes a dev state at state with package dev's own first start
// (dev.Run provisions, starts the three parts and, once they are ready,
// stops them), and returns its layout.
func provision(ctx context.Context, state string, log io.Writer) (dev.Layout, error) {
	if _, err := os.Stat(state); !errors.Is(err, fs.ErrNotExist) {
		return dev.Layout{}, fmt.Errorf("%s exists: the generator provisions a new dev state", state)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := dev.Run(ctx, dev.Options{State: state, Stdout: log, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ready: func(dev.Manifest) { cancel() }})
	if err != nil {
		return dev.Layout{}, fmt.Errorf("provisioning the dev state %s: %w", state, err)
	}
	return dev.NewLayout(state)
}

// start starts the appliance, the host and the controller, in that order,
// each once the one before it serves. appEnv is the appliance's extra
// environment (a failpoint).
func (s *stack) start() error {
	// The dev mode makes its socket directory at its start and removes it
	// at a clean stop; the daemons run here bind their sockets in it.
	if err := os.Mkdir(s.l.Run, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := s.startApp(); err != nil {
		return err
	}
	var err error
	s.host, err = startChild("host", s.logDir, s.self,
		[]string{"daemon", "host", s.l.OperatorStore, s.l.AdminSocket, strconv.FormatInt(s.offsetMs, 10)}, nil, readyLine, true)
	if err != nil {
		return errors.Join(err, s.stop())
	}
	s.ctl, err = startChild("controller", s.logDir, s.self,
		[]string{"daemon", "controller", s.l.Config, strconv.FormatInt(s.offsetMs, 10)}, nil, readyLine, true)
	if err != nil {
		return errors.Join(err, s.stop())
	}
	return nil
}

// startApp starts the real steward-appliance on the dev state's appliance
// directory and socket, with env added (a failpoint).
func (s *stack) startApp(env ...string) error {
	var err error
	s.app, err = startChild("appliance", s.logDir, s.appBin,
		[]string{"serve", "--socket", s.l.ApplianceSocket, "--state", s.l.Appliance, "--log-level", "warn"}, env, "ready ", false)
	return err
}

// stop stops whichever daemons run, the controller first.
func (s *stack) stop() error {
	var errs []error
	for _, c := range []**child{&s.ctl, &s.host, &s.app} {
		if *c != nil {
			errs = append(errs, (*c).stop())
			*c = nil
		}
	}
	if err := os.Remove(s.l.Run); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// step moves the host's and the controller's clock one day on. The caller
// has no call in flight.
func (s *stack) step() error {
	s.offsetMs += day.Milliseconds()
	if err := s.host.setOffset(s.offsetMs); err != nil {
		return err
	}
	return s.ctl.setOffset(s.offsetMs)
}

// now is the daemons' clock.
func (s *stack) now() time.Time { return time.Now().Add(time.Duration(s.offsetMs) * time.Millisecond) }

// admin sends one request on the running host's admin socket, as
// steward-operator does.
func (s *stack) admin(ctx context.Context, req admin.Request) (admin.Reply, error) {
	cl, err := admin.DialAt(ctx, s.l.OperatorStore, s.l.AdminSocket)
	if err != nil {
		return admin.Reply{}, err
	}
	defer cl.Close()
	rep, err := cl.Do(req)
	if err != nil {
		return rep, fmt.Errorf("admin %s: %w", req.Op, err)
	}
	return rep, nil
}

// journalDirs are the three journals of a dev state, by daemon.
func journalDirs(l dev.Layout) map[string]string {
	return map[string]string{
		"host":       filepath.Join(l.OperatorStore, "journal"),
		"controller": filepath.Join(l.Controller, "journal"),
		"appliance":  filepath.Join(l.Appliance, "journal"),
	}
}
