package appliance

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// Usage is steward-appliance's usage text (help, --help).
const Usage = `steward-appliance: the reference oracle-operations-v1 application.

Usage:
  steward-appliance serve --socket PATH --state DIR [--prefix /v1] [--peer-uid N]... [--log-level LEVEL]
  steward-appliance inspect --state DIR
  steward-appliance history snapshot --state DIR
  steward-appliance history archive --state DIR --to ARCHIVEDIR
  steward-appliance help | --help

Commands:
  serve     serve the operations over HTTP/1.1 on a Unix socket until SIGINT or SIGTERM
  inspect   print what the journal and its snapshots hold, read-only (also while serving)
  history   snapshot the state now, or archive the journal's old segments
            (on a stopped appliance, as its own account)

Run "steward-appliance serve --help" for the flags of serve, and
"steward-appliance history --help" for history.
`

const serveUsage = `Usage: steward-appliance serve --socket PATH --state DIR [--prefix /v1] [--peer-uid N]... [--log-level LEVEL]

Serves GET PREFIX/operations, GET PREFIX/operations/ID and POST PREFIX/invoke
on a Unix socket created with mode 0660, to the host's account only: its own
account, a peer whose group is the socket's, and the accounts given with
--peer-uid (repeatable, or a comma-separated list); every other peer is
answered 403 and closed. Every answer to an invocation is
journaled in DIR/journal (DIR is created 0700) before it is sent, and the
same requestId with the same body replays it, also after a restart: the
answers are found through the history index DIR/index/answers.db, and a
start reads the newest snapshot in DIR/snapshots and replays only the
records after it. A damaged index is set aside (renamed .damaged) and
rebuilt from the journal. Prints "ready PATH" on stdout once it serves.
Logs go to stderr.

Flags:
`

// Main runs one steward-appliance command and returns its exit status: 0
// after help, a clean stop (SIGINT or SIGTERM), an inspection or a history
// command done, 1 when one failed, 2 for a usage error or a refusal.
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
	case "inspect":
		return inspectCommand(args[1:], stdout, stderr)
	case "history":
		return historyCommand(args[1:], stdout, stderr)
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
	var peers []uint32
	fs.Func("peer-uid", "an account `UID` served besides the appliance's own and the socket's group (repeatable, or N,M,...)", func(v string) error {
		uids, err := parsePeerUIDs(v)
		peers = append(peers, uids...)
		return err
	})
	if code, done := parseFlags(fs, serveUsage, args, stdout, stderr); done {
		return code
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
	err := Serve(ctx, Config{Socket: *socket, State: *state, Prefix: *prefix, PeerUIDs: peers, Logger: log, Ready: stdout})
	if err != nil {
		log.Error("steward-appliance serve failed", "err", err)
		return 1
	}
	return 0
}

// parsePeerUIDs reads one --peer-uid value: decimal uids separated by
// commas, each at most 4294967294 ((uid_t)-1 is no account).
func parsePeerUIDs(v string) ([]uint32, error) {
	var out []uint32
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil || n == math.MaxUint32 {
			return nil, fmt.Errorf("%q is not an account uid (a decimal number from 0 to %d)", f, uint32(math.MaxUint32-1))
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

// parseFlags parses a command's flags: -h, -help or --help anywhere
// prints usage and the flags to stdout (exit 0), a bad flag prints them
// to stderr (exit 2). done says the command ends with code.
func parseFlags(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0, true
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2, true
	}
	return 0, false
}
