// Command steward-appliance is the reference oracle-operations-v1
// application: exact arithmetic, unit conversion, durations and hashes
// served over HTTP/1.1 on a Unix socket, with a journal of request ids.
//
//	steward-appliance serve --socket PATH --state DIR [--prefix /v1] [--log-level info]
//
// It only parses flags; package appliance does the work.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/stewardrt/steward/appliance"
)

const usage = `steward-appliance: the reference oracle-operations-v1 application.

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

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "serve":
		return serve(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "steward-appliance: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	socket := fs.String("socket", "", "path of the Unix socket to create (required)")
	state := fs.String("state", "", "state directory holding the journal (required)")
	prefix := fs.String("prefix", appliance.DefaultPrefix, "API prefix of every path")
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
	err := appliance.Serve(ctx, appliance.Config{Socket: *socket, State: *state, Prefix: *prefix, Logger: log, Ready: stdout})
	if err != nil {
		log.Error("steward-appliance serve failed", "err", err)
		return 1
	}
	return 0
}
