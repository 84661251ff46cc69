package dev

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: steward-dev [--state DIR] [--once [--keep]] [--log-level LEVEL]

Runs the steward host, the controller and the reference appliance in one
process under your account: a development mode, with one account and every
key on local disk. Each part keeps its own state directory, keys, journal and
sockets and they talk over the same Unix sockets and signed frames as in
production.

  --state DIR        state directory; created and provisioned on first start,
                     reused later (default: $XDG_STATE_HOME/steward-dev or
                     ~/.local/state/steward-dev, the same one at every start)
  --once             run a short demonstration through the MCP socket, verify
                     the receipts, stop and exit; without --state in a new
                     temporary state directory (never the default), removed
                     at the end
  --keep             with --once and no --state: keep that directory
  --log-level LEVEL  the daemons' log level on stderr: debug, info, warn, error
                     (default info; warn with --once)

The sockets are in $XDG_RUNTIME_DIR/steward-dev (else /tmp/steward-dev-UID;
another state than the default adds a hash of its path), mode 0700, removed
when the stack stops. It writes DIR/dev.json with the socket paths and prints
the MCP client configuration. Without --once it serves until interrupted.
Stopped, ` + "`rm -rf DIR`" + ` removes everything it made.
`

// Main is the whole of `steward-dev`: it parses args (without the program
// name), runs the dev mode until SIGINT or SIGTERM (or the end of --once)
// and returns the exit status: 0 ok, 1 failure, 2 usage. The cmd main only
// calls it, so that the acceptance journeys can run it as a real process
// from their test binary.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("steward-dev", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	state := fs.String("state", "", "")
	once := fs.Bool("once", false, "")
	keep := fs.Bool("keep", false, "")
	level := fs.String("log-level", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "steward-dev: %v\n%s", err, usage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "steward-dev: unexpected argument %q\n%s", fs.Arg(0), usage)
		return 2
	}
	if *keep && (!*once || *state != "") {
		fmt.Fprintf(stderr, "steward-dev: --keep keeps the temporary state directory of --once without --state; with --state the state is always kept\n%s", usage)
		return 2
	}
	var lvl slog.Level
	switch {
	case *level != "":
		if err := lvl.UnmarshalText([]byte(*level)); err != nil {
			fmt.Fprintf(stderr, "steward-dev: --log-level: %v\n", err)
			return 2
		}
	case *once:
		lvl = slog.LevelWarn
	default:
		lvl = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, Options{State: *state, Once: *once, Keep: *keep, Stdout: stdout, Logger: log}); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
