package appliance

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Usage is steward-appliance's usage text (help, --help).
const Usage = `steward-appliance: the reference oracle-operations-v1 application.

Usage:
  steward-appliance serve --socket PATH --state DIR [--prefix /v1] [--log-level LEVEL]
  steward-appliance help | --help

Commands:
  serve   serve the operations over HTTP/1.1 on a Unix socket until SIGINT or SIGTERM

Run "steward-appliance serve --help" for the flags of serve.
`

const serveUsage = `Usage: steward-appliance serve --socket PATH --state DIR [--prefix /v1] [--log-level LEVEL]

Serves GET PREFIX/operations, GET PREFIX/operations/ID and POST PREFIX/invoke
on a Unix socket created with mode 0660. Every answer to an invocation is
journaled in DIR/journal (DIR is created 0700) before it is sent, and the
same requestId with the same body replays it, also after a restart.
Prints "ready PATH" on stdout once it serves. Logs go to stderr.

Flags:
`

// Main runs one steward-appliance command and returns its exit status: 0
// after help or a clean stop (SIGINT or SIGTERM), 1 when serving failed,
// 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, Usage)
		return 0
	case "serve":
		return serveCommand(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "steward-appliance: unknown command %q\n\n%s", args[0], Usage)
	return 2
}

// serveCommand is `steward-appliance serve`.
func serveCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	socket := fs.String("socket", "", "path of the Unix socket to create (required)")
	state := fs.String("state", "", "state directory holding the journal (required)")
	prefix := fs.String("prefix", DefaultPrefix, "API prefix of every path")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "steward-appliance serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *socket == "" || *state == "" {
		fmt.Fprintln(stderr, "steward-appliance serve: --socket and --state are required")
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "steward-appliance serve: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Serve(ctx, Config{Socket: *socket, State: *state, Prefix: *prefix, Logger: log, Ready: stdout})
	if err != nil {
		log.Error("steward-appliance serve failed", "err", err)
		return 1
	}
	return 0
}
