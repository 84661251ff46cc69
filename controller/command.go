package controller

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/mcpproxy"
	"github.com/stewardrt/steward/journal/history"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Exit codes of steward-controller.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitRefused = 2 // refused input, config or binding, or usage
)

// Usage is steward-controller's usage text (--help).
const Usage = `usage:
  steward-controller keys init --dir DIR
  steward-controller serve --config FILE [--snapshot-every N]
  steward-controller mcp --socket PATH
  steward-controller attempts list --config FILE [--agent NAME] [--json]
  steward-controller attempts inspect ID --config FILE
  steward-controller attempts resolve ID --config FILE
  steward-controller journal inspect --config FILE
  steward-controller receipts compare --file EXPORT --config FILE
  steward-controller history snapshot --config FILE
  steward-controller history archive --config FILE --to ARCHIVEDIR
  steward-controller clock accept --config FILE

history snapshot makes a snapshot of the ledger now (through the running
controller when it runs) and prints its name and mark. history archive makes
one, exports the host's receipts of the journal records it archives into
ARCHIVEDIR.receipts, each verified under the pinned host key, then moves the
journal segments before the snapshot's mark into ARCHIVEDIR (absent or empty);
a call again with an archived requestId is then refused, naming the archive.
clock accept takes the wall clock's UTC day as the payer's day when it is
behind the latest day recorded (a clock set forward, then corrected); the
day's spending carries to it, nothing refills.
Exit codes: 0 ok, 1 failure, 2 refused input (nothing was changed).
`

// errUsage marks a usage error (exit 2).
var errUsage = errors.New("usage")

// CLI is the steward-controller command line: what the cmd main hands its
// arguments, streams and systemd hooks to. The hooks have the signatures
// of package systemd's functions so that the main passes those as they
// are; a nil hook is skipped (as outside systemd).
type CLI struct {
	Stdin          *os.File // the agent's side of `mcp` (read through the runtime poller)
	Stdout, Stderr io.Writer
	// Listeners returns the sockets passed by socket activation, keyed
	// ListenerForeground and ListenerMCP (systemd.Listeners).
	Listeners func() (map[string]*net.UnixListener, error)
	// Ready reports readiness once serve's journal is open and its
	// sockets bound (systemd.Ready).
	Ready func(extra ...string) error
	// Watchdog pings while health passes until ctx ends (systemd.StartWatchdog).
	Watchdog func(ctx context.Context, health func() error) (time.Duration, error)
	// Stopping reports that serve was asked to stop (systemd.Stopping).
	Stopping func() error
}

// Main runs one steward-controller command and returns its exit code:
// ExitOK, ExitFailure, or ExitRefused for usage errors, refused configs
// or bindings and refused history commands. Errors are printed on stderr.
func (c *CLI) Main(args []string) int {
	err := c.run(args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage), errors.Is(err, ErrConfig), errors.Is(err, ErrBinding), errors.Is(err, ErrRefused):
		fmt.Fprintln(c.Stderr, "steward-controller:", err)
		return ExitRefused
	default:
		fmt.Fprintln(c.Stderr, "steward-controller:", err)
		return ExitFailure
	}
}

func (c *CLI) run(args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(c.Stdout, Usage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "keys":
		return c.keys(rest)
	case "serve":
		return c.serve(ctx, rest)
	case "mcp":
		fs := newFlags("mcp")
		sock := fs.String("socket", "", "the controller's MCP socket")
		if err := c.parse(fs, rest, 0); err != nil {
			return err
		}
		return mcpproxy.RunProxy(ctx, *sock, c.Stdin, c.Stdout)
	case "attempts":
		return c.attempts(ctx, rest)
	case "journal":
		return c.journal(rest)
	case "receipts":
		return c.receipts(rest)
	case "history":
		return c.history(ctx, rest)
	case "clock":
		return c.clock(ctx, rest)
	default:
		return fmt.Errorf("%w: unknown command %q\n%s", errUsage, cmd, Usage)
	}
}

func (c *CLI) keys(args []string) error {
	if len(args) == 0 || args[0] != "init" {
		return fmt.Errorf("%w: keys init --dir DIR", errUsage)
	}
	fs := newFlags("keys init")
	dir := fs.String("dir", "", "directory for the four role keys (0700)")
	if err := c.parse(fs, args[1:], 0); err != nil {
		return err
	}
	pub, err := InitKeys(*dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, pub)
	return nil
}

func (c *CLI) serve(ctx context.Context, args []string) error {
	fs := newFlags("serve")
	cfg := fs.String("config", "", "the controller config (JSON)")
	every := fs.Uint64("snapshot-every", history.DefaultEvery, "journal records between snapshots of the ledger (at least 1)")
	if err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if *every == 0 {
		return fmt.Errorf("%w: --snapshot-every 0: a snapshot is made after at least 1 record", errUsage)
	}
	log := c.logger()
	// Under systemd the three sockets come from the .socket units;
	// otherwise the map is empty and Serve binds them itself.
	var ls map[string]*net.UnixListener
	if c.Listeners != nil {
		var err error
		if ls, err = c.Listeners(); err != nil {
			return err
		}
	}
	return Serve(ctx, *cfg, Options{
		Logger:        log,
		Listeners:     ls,
		SnapshotEvery: *every,
		Ready: func() {
			if c.Ready == nil {
				return
			}
			if err := c.Ready("STATUS=serving"); err != nil {
				log.Warn("sd_notify READY", "err", err)
			}
		},
		Watchdog: func(health func() error) {
			if c.Watchdog != nil {
				if _, err := c.Watchdog(ctx, health); err != nil {
					log.Warn("sd_notify watchdog", "err", err)
				}
			}
			if c.Stopping != nil {
				context.AfterFunc(ctx, func() { c.Stopping() })
			}
		},
	})
}

func (c *CLI) journal(args []string) error {
	if len(args) == 0 || args[0] != "inspect" {
		return fmt.Errorf("%w: journal inspect --config FILE", errUsage)
	}
	fs := newFlags("journal inspect")
	cfg := fs.String("config", "", "the controller config (JSON)")
	if err := c.parse(fs, args[1:], 0); err != nil {
		return err
	}
	s, err := InspectJournal(*cfg)
	if err != nil {
		return err
	}
	return c.printJSON(s)
}

func (c *CLI) attempts(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: attempts list|inspect|resolve", errUsage)
	}
	sub := args[0]
	fs := newFlags("attempts " + sub)
	cfg := fs.String("config", "", "the controller config (JSON)")
	switch sub {
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		var agent optionalString
		fs.Var(&agent, "agent", "only the attempts of this agent (its name, uid:N or foreground)")
		if err := c.parse(fs, args[1:], 0); err != nil {
			return err
		}
		if agent.set {
			if err := ctlconf.ValidatePrincipal(agent.s); err != nil {
				return fmt.Errorf("%w: --agent: %w", errUsage, err)
			}
		}
		list, err := ListAttempts(*cfg)
		if err != nil {
			return err
		}
		if agent.set {
			list = AttemptsOf(list, agent.s)
		}
		if *asJSON {
			return c.printJSON(list)
		}
		if len(list) == 0 {
			fmt.Fprintln(c.Stdout, "no uncertain attempts")
		}
		for _, a := range list {
			fmt.Fprintf(c.Stdout, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, a.Tool, a.Application, a.RequestID, a.Agent, a.Detail)
		}
		return nil
	case "inspect", "resolve":
		id, rest := "", args[1:]
		if len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
			id, rest = rest[0], rest[1:]
		}
		if err := c.parse(fs, rest, 0); err != nil {
			return err
		}
		if id == "" {
			return fmt.Errorf("%w: attempts %s ID --config FILE", errUsage, sub)
		}
		op := InspectAttempt
		if sub == "resolve" {
			op = ResolveAttempt
		}
		ins, err := op(ctx, *cfg, id, c.logger())
		if err != nil {
			return err
		}
		return c.printJSON(ins)
	default:
		return fmt.Errorf("%w: attempts list|inspect|resolve", errUsage)
	}
}

// optionalString is a string flag that may be absent (parse requires
// every flag.Getter string flag): set says whether it was given.
type optionalString struct {
	s   string
	set bool
}

func (o *optionalString) String() string     { return o.s }
func (o *optionalString) Set(v string) error { o.s, o.set = v, true; return nil }

// logger is the log of serve and of the attempt commands: text on stderr.
func (c *CLI) logger() *slog.Logger { return slog.New(slog.NewTextHandler(c.Stderr, nil)) }

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("steward-controller "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags, printing help on stdout for --help, and refuses
// stray arguments (beyond nargs) and missing string flags: every string
// flag of a controller command is required.
func (c *CLI) parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(c.Stdout)
			fmt.Fprintf(c.Stdout, "usage of %s:\n", fs.Name())
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() != nargs {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	var missing error
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if s, ok := g.Get().(string); ok && s == "" && missing == nil {
				missing = fmt.Errorf("%w: --%s is required", errUsage, f.Name)
			}
		}
	})
	return missing
}

func (c *CLI) printJSON(v any) error {
	enc := json.NewEncoder(c.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// receipts compares the host's exported receipts with the ones this
// controller recorded: exit 0 when they agree, 1 with findings (each on
// stdout), 2 for refused input.
func (c *CLI) receipts(args []string) error {
	if len(args) == 0 || args[0] != "compare" {
		return fmt.Errorf("%w: receipts compare --file EXPORT --config FILE", errUsage)
	}
	fs := newFlags("receipts compare")
	file := fs.String("file", "", "the host's exported receipts (steward-operator receipts export)")
	cfgPath := fs.String("config", "", "the controller's config")
	if err := c.parse(fs, args[1:], 0); err != nil {
		return err
	}
	b, err := readBounded(*file, maxReceiptsFile)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	cmp, err := CompareReceipts(*cfgPath, b)
	if err != nil {
		return err
	}
	if err := c.printJSON(cmp); err != nil {
		return err
	}
	if len(cmp.Findings) > 0 {
		return fmt.Errorf("%d finding(s): the host's receipts and this controller's disagree; the first: %s", len(cmp.Findings), cmp.Findings[0])
	}
	return nil
}

// maxReceiptsFile bounds an exported receipts file the controller reads.
const maxReceiptsFile = 256 << 20
