package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
)

// Exit codes of steward-operator.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitRefused = 2 // refused input or usage
)

// errUsage marks a usage error (exit 2).
var errUsage = errors.New("usage")

// CLI is the steward-operator command line: what the cmd main hands its
// arguments, output streams and systemd hooks to. The hooks have the
// signatures of package systemd's functions so that the main passes those
// as they are; a nil hook is skipped (as outside systemd).
type CLI struct {
	Stdout, Stderr io.Writer
	// Ready reports readiness once serve's journal is open and its
	// sockets bound (systemd.Ready); its error is logged, not fatal.
	Ready func(extra ...string) error
	// Watchdog pings while health passes until ctx ends (systemd.StartWatchdog).
	Watchdog func(ctx context.Context, health func() error) (time.Duration, error)
	// Stopping reports that serve was asked to stop (systemd.Stopping).
	Stopping func() error
}

type command struct {
	usage string
	run   func(c *CLI, args []string) error
}

func commands() map[string]command {
	cmds := map[string]command{
		"init":             {"init --store DIR", (*CLI).cmdInit},
		"serve":            {"serve --store DIR [--approvals-socket PATH --approvers-group GROUP] [--snapshot-every N]", (*CLI).cmdServe},
		"controller add":   {"controller add NAME --uid UID --keys FILE --control PATH --store DIR", (*CLI).cmdControllerAdd},
		"controller list":  {"controller list --store DIR [--json]", (*CLI).cmdControllerList},
		"purse fund":       {"purse fund NAME AMOUNT --store DIR", (*CLI).cmdPurseFund},
		"purse show":       {"purse show NAME --store DIR [--json]", (*CLI).cmdPurseShow},
		"purse freeze":     {"purse freeze NAME --store DIR", (*CLI).cmdPurseFreeze},
		"purse thaw":       {"purse thaw NAME --store DIR", (*CLI).cmdPurseThaw},
		"grant issue":      {"grant issue --controller C --application A [--operations PATTERN]... --price N [--discovery-price N] [--refusal-price N] --per-day N --not-after TIME --store DIR", (*CLI).cmdGrantIssue},
		"grant revoke":     {"grant revoke ID --store DIR", (*CLI).cmdGrantRevoke},
		"grant list":       {"grant list --store DIR [--json]", (*CLI).cmdGrantList},
		"route register":   {"route register ROUTE APP REQUEST.json [--inactive] --store DIR", (*CLI).cmdRouteRegister},
		"route activate":   {"route activate ROUTE --store DIR", (*CLI).cmdRouteActivate},
		"route deactivate": {"route deactivate ROUTE --store DIR", (*CLI).cmdRouteDeactivate},
		"route remove":     {"route remove ROUTE --store DIR", (*CLI).cmdRouteRemove},
		"route list":       {"route list --store DIR [--json]", (*CLI).cmdRouteList},
		"route show":       {"route show ROUTE --store DIR [--json]", (*CLI).cmdRouteShow},
		"bundle build":     {"bundle build CONTROLLER --out FILE --store DIR [--host-uid UID]", (*CLI).cmdBundleBuild},
		"receipts verify":  {"receipts verify (--store DIR [--from POINTFILE] [--save-point FILE] [--archive DIR]... | --file FILE --host-key FILE [--controller-keys FILE [--controller NAME]]) [--json]", (*CLI).cmdReceiptsVerify},
		"receipts export":  {"receipts export --store DIR --out FILE", (*CLI).cmdReceiptsExport},
		"journal inspect":  {"journal inspect --store DIR [--json]", (*CLI).cmdJournalInspect},
		"attempts list":    {"attempts list --store DIR [--state S] [--json]", (*CLI).cmdAttemptsList},
		"attempts inspect": {"attempts inspect ID --store DIR [--json]", (*CLI).cmdAttemptsInspect},
		"attempts resolve": {"attempts resolve ID (--redeliver|--release|--charge) --reason TEXT --store DIR [--json]", (*CLI).cmdAttemptsResolve},
		"agent set": {"agent set NAME --controller C [--operations APP/OP]... [--calls-per-day N] [--credits-per-day N] [--credits-per-conversation N] " +
			"[--conversations-per-day N] [--rate N] [--burst N] [--approve-ops APP/OP]... [--park DURATION] [--ask-expiry DURATION] " +
			"[--on-timeout approve|deny] [--advisor NAME]... [--agent-answers N] --store DIR", (*CLI).cmdAgentSet},
		"agent show": {"agent show NAME --controller C --store DIR [--json]", (*CLI).cmdAgentShow},
		"agent list": {"agent list --store DIR [--json]", (*CLI).cmdAgentList},

		"controller control": {"controller control NAME --control PATH --store DIR", (*CLI).cmdControllerControl},
		"history snapshot":   {"history snapshot --store DIR", (*CLI).cmdHistorySnapshot},
		"history archive":    {"history archive --store DIR --to ARCHIVEDIR", (*CLI).cmdHistoryArchive},
		"clock accept":       {"clock accept --store DIR [--json]", (*CLI).cmdClockAccept},
	}
	for n, c := range approvalsCommands() {
		cmds[n] = c
	}
	return cmds
}

// Main runs one steward-operator command and returns its exit code. Errors
// are printed on one line.
func (c *CLI) Main(args []string) int {
	cmds := commands()
	var name string
	var rest []string
	if len(args) >= 1 {
		if _, ok := cmds[args[0]]; ok {
			name, rest = args[0], args[1:]
		} else if len(args) >= 2 {
			if _, ok := cmds[args[0]+" "+args[1]]; ok {
				name, rest = args[0]+" "+args[1], args[2:]
			}
		}
	}
	if name == "" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			c.usage(cmds)
			return ExitOK
		}
		c.usage(cmds)
		return ExitRefused
	}
	err := cmds[name].run(c, rest)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage), errors.Is(err, views.ErrRefused), errors.Is(err, audit.ErrRefused):
		fmt.Fprintf(c.Stderr, "steward-operator %s: %s\n", name, oneLine(err))
		return ExitRefused
	default:
		fmt.Fprintf(c.Stderr, "steward-operator %s: %s\n", name, oneLine(err))
		return ExitFailure
	}
}

func (c *CLI) usage(cmds map[string]command) {
	fmt.Fprintln(c.Stderr, "usage: steward-operator COMMAND [flags]; commands:")
	for _, n := range []string{"init", "serve", "controller add", "controller list", "purse fund", "purse show", "purse freeze", "purse thaw",
		"grant issue", "grant revoke", "grant list", "route register", "route activate", "route deactivate", "route remove",
		"route list", "route show", "bundle build",
		"receipts verify", "receipts export", "journal inspect", "attempts list", "attempts inspect", "attempts resolve",
		"agent set", "agent show", "agent list", "approvals list", "approvals show", "approvals respond", "approvals watch",
		"history snapshot", "history archive", "clock accept"} {
		fmt.Fprintln(c.Stderr, "  steward-operator "+cmds[n].usage)
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// flags starts the flag set of the command name with the --store flag
// every command has.
func flags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return fs, storeFlag(fs)
}

// parse parses flags interspersed with npos positional arguments; the flag
// set's name is the command's, whose usage line it prints.
func (c *CLI) parse(fs *flag.FlagSet, args []string, npos int) ([]string, error) {
	usage := commands()[fs.Name()].usage
	fs.SetOutput(c.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(c.Stderr, "usage: steward-operator "+usage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != npos {
		return nil, fmt.Errorf("%w: want %d arguments, got %d (%s)", errUsage, npos, len(pos), usage)
	}
	return pos, nil
}

func storeFlag(fs *flag.FlagSet) *string { return fs.String("store", "", "the operator store `DIR`") }

func needStore(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: --store DIR is required", errUsage)
	}
	return nil
}

func (c *CLI) printJSON(v any) error {
	enc := json.NewEncoder(c.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// admin runs one administrative request, directly or through the daemon.
func (c *CLI) admin(store string, req admin.Request) (admin.Reply, error) {
	return c.adminWithin(store, 30*time.Second, req)
}

// adminWithin is admin waiting up to d for the running host's answer.
func (c *CLI) adminWithin(store string, d time.Duration, req admin.Request) (admin.Reply, error) {
	if err := needStore(store); err != nil {
		return admin.Reply{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := admin.Open(ctx, store)
	if err != nil {
		return admin.Reply{}, err
	}
	defer a.Close()
	return a.DoWithin(d, req)
}

// readOnly opens the store for a read-only command.
func readOnly(store string) (*operator.Store, error) {
	if err := needStore(store); err != nil {
		return nil, err
	}
	return operator.OpenReadOnly(store)
}

// show runs a read-only command: it opens the store without taking its
// lock (so it works while serve runs), gets what the command shows from it
// and prints that as JSON with --json, else as text.
func show[T any](c *CLI, name string, args []string, npos int, get func(s *operator.Store, pos []string) (T, error), text func(T)) error {
	fs, store := flags(name)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args, npos)
	if err != nil {
		return err
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	v, err := get(s, pos)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(v)
	}
	text(v)
	return nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return readAllBounded(f, path, limit)
}

// readPrivate reads what, a file of at most limit bytes that must be
// private to this account (wire.OpenPrivateFile): another account's, or
// one another account can read or change, is refused naming the file.
func readPrivate(what, path string, limit int64) ([]byte, error) {
	f, err := wire.OpenPrivateFile(path)
	var ue *wire.UnsafeFileError
	if errors.As(err, &ue) {
		return nil, fmt.Errorf("%w: %s %s %s", views.ErrRefused, what, ue.Path, ue.Reason)
	}
	if err != nil {
		return nil, err
	}
	return readAllBounded(f, path, limit)
}

// readAllBounded reads f, path, of at most limit bytes, and closes it.
func readAllBounded(f *os.File, path string, limit int64) ([]byte, error) {
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s exceeds the bound of %d bytes", views.ErrRefused, path, limit)
	}
	return b, nil
}
