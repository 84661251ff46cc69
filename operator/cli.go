package operator

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stewardrt/steward/journal"
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
	return map[string]command{
		"init":            {"init --store DIR", (*CLI).cmdInit},
		"serve":           {"serve --store DIR", (*CLI).cmdServe},
		"controller add":  {"controller add NAME --uid UID --keys FILE --store DIR", (*CLI).cmdControllerAdd},
		"controller list": {"controller list --store DIR [--json]", (*CLI).cmdControllerList},
		"purse fund":      {"purse fund NAME AMOUNT --store DIR", (*CLI).cmdPurseFund},
		"purse show":      {"purse show NAME --store DIR [--json]", (*CLI).cmdPurseShow},
		"purse freeze":    {"purse freeze NAME --store DIR", (*CLI).cmdPurseFreeze},
		"purse thaw":      {"purse thaw NAME --store DIR", (*CLI).cmdPurseThaw},
		"grant issue":     {"grant issue --controller C --application A [--operations PATTERN]... --price N [--discovery-price N] --per-day N --not-after TIME --store DIR", (*CLI).cmdGrantIssue},
		"grant revoke":    {"grant revoke ID --store DIR", (*CLI).cmdGrantRevoke},
		"grant list":      {"grant list --store DIR [--json]", (*CLI).cmdGrantList},
		"route register":  {"route register ROUTE APP REQUEST.json --store DIR", (*CLI).cmdRouteRegister},
		"route list":      {"route list --store DIR [--json]", (*CLI).cmdRouteList},
		"route show":      {"route show ROUTE --store DIR [--json]", (*CLI).cmdRouteShow},
		"bundle build":    {"bundle build CONTROLLER --out FILE --store DIR [--host-uid UID]", (*CLI).cmdBundleBuild},
		"receipts verify": {"receipts verify (--store DIR [--from SEQ] | --file FILE [--host-key FILE]) [--json]", (*CLI).cmdReceiptsVerify},
		"receipts export": {"receipts export --store DIR --out FILE", (*CLI).cmdReceiptsExport},
		"journal inspect": {"journal inspect --store DIR [--json]", (*CLI).cmdJournalInspect},
	}
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
	case errors.Is(err, errUsage), errors.Is(err, ErrRefused):
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
		"grant issue", "grant revoke", "grant list", "route register", "route list", "route show", "bundle build",
		"receipts verify", "receipts export", "journal inspect"} {
		fmt.Fprintln(c.Stderr, "  steward-operator "+cmds[n].usage)
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// parse parses flags interspersed with npos positional arguments.
func (c *CLI) parse(fs *flag.FlagSet, usage string, args []string, npos int) ([]string, error) {
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
			return nil, fmt.Errorf("%w: %v", errUsage, err)
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

func (c *CLI) cmdInit(args []string) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	store := storeFlag(fs)
	if _, err := c.parse(fs, commands()["init"].usage, args, 0); err != nil {
		return err
	}
	if err := needStore(*store); err != nil {
		return err
	}
	pub, err := Init(*store)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "store %s created; operator key %s\n", *store, pub.KID())
	return nil
}

func (c *CLI) cmdServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	store := storeFlag(fs)
	if _, err := c.parse(fs, commands()["serve"].usage, args, 0); err != nil {
		return err
	}
	if err := needStore(*store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	return Serve(ctx, *store, ServeOptions{
		Logger: log,
		Ready: func() {
			if c.Ready == nil {
				return
			}
			if err := c.Ready("STATUS=serving"); err != nil {
				log.Warn("steward-operator: sd_notify READY", "err", err)
			}
		},
		// The unit sets WatchdogSec=: without pings systemd kills the
		// host, and with a failed journal the pings stop so that it does.
		Watchdog: func(health func() error) {
			if c.Watchdog != nil {
				if _, err := c.Watchdog(ctx, health); err != nil {
					log.Warn("steward-operator: sd_notify watchdog", "err", err)
				}
			}
			if c.Stopping != nil {
				context.AfterFunc(ctx, func() { c.Stopping() })
			}
		},
	})
}

// admin runs one administrative request, directly or through the daemon.
func (c *CLI) admin(store string, req AdminRequest) (AdminReply, error) {
	if err := needStore(store); err != nil {
		return AdminReply{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := OpenAdmin(ctx, store)
	if err != nil {
		return AdminReply{}, err
	}
	defer a.Close()
	return a.Do(req)
}

// readOnly opens the store for a read-only command.
func readOnly(store string) (*Store, error) {
	if err := needStore(store); err != nil {
		return nil, err
	}
	return OpenReadOnly(store)
}

func (c *CLI) cmdControllerAdd(args []string) error {
	fs := flag.NewFlagSet("controller add", flag.ContinueOnError)
	store := storeFlag(fs)
	uid := fs.Int64("uid", -1, "the controller's OS account `UID`")
	keys := fs.String("keys", "", "the controller's public keys `FILE` (steward-controller keys init)")
	pos, err := c.parse(fs, commands()["controller add"].usage, args, 1)
	if err != nil {
		return err
	}
	if *uid < 0 || *uid > 1<<32-2 || *keys == "" {
		return fmt.Errorf("%w: --uid UID and --keys FILE are required", errUsage)
	}
	b, err := readBounded(*keys, 64<<10)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, AdminRequest{Op: OpControllerAdd, Name: pos[0], UID: uint32(*uid), Keys: b})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "controller %s pinned: uid %d, tool key %s, dispatch key %s\n", rep.Controller.Name, rep.Controller.UID, rep.Controller.ToolKID, rep.Controller.DispatchKID)
	return nil
}

func (c *CLI) cmdControllerList(args []string) error {
	fs := flag.NewFlagSet("controller list", flag.ContinueOnError)
	store := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, commands()["controller list"].usage, args, 0); err != nil {
		return err
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	cs := s.Controllers()
	if *asJSON {
		return c.printJSON(cs)
	}
	for _, v := range cs {
		fmt.Fprintf(c.Stdout, "%s\tuid %d\ttool %s\tdispatch %s\n", v.Name, v.UID, v.ToolKID, v.DispatchKID)
	}
	return nil
}

func (c *CLI) purseCmd(name string, op string, args []string, npos int) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	store := storeFlag(fs)
	pos, err := c.parse(fs, commands()[name].usage, args, npos)
	if err != nil {
		return err
	}
	req := AdminRequest{Op: op, Name: pos[0]}
	if npos == 2 {
		n, err := strconv.ParseUint(pos[1], 10, 63)
		if err != nil {
			return fmt.Errorf("%w: AMOUNT %q is not a whole number of credits", errUsage, pos[1])
		}
		req.Amount = n
	}
	rep, err := c.admin(*store, req)
	if err != nil {
		return err
	}
	c.printPurse(*rep.Purse)
	return nil
}

func (c *CLI) printPurse(p PurseView) {
	state := "open"
	if p.Frozen {
		state = "FROZEN"
	}
	fmt.Fprintf(c.Stdout, "purse %s: balance %d (funded %d, charged %d, held %d), %s\n", p.Controller, p.Balance, p.Funded, p.Charged, p.Holds, state)
}

func (c *CLI) cmdPurseFund(args []string) error {
	return c.purseCmd("purse fund", OpPurseFund, args, 2)
}

func (c *CLI) cmdPurseFreeze(args []string) error {
	return c.purseCmd("purse freeze", OpPurseFreeze, args, 1)
}

func (c *CLI) cmdPurseThaw(args []string) error {
	return c.purseCmd("purse thaw", OpPurseThaw, args, 1)
}

func (c *CLI) cmdPurseShow(args []string) error {
	fs := flag.NewFlagSet("purse show", flag.ContinueOnError)
	store := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, commands()["purse show"].usage, args, 1)
	if err != nil {
		return err
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := s.PurseShow(pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(p)
	}
	c.printPurse(p)
	return nil
}

// listFlag collects a repeatable flag; each value may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// parseTime reads an RFC 3339 time or +DURATION from now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutPrefix(s, "+"); ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: --not-after %q: %v", errUsage, s, err)
		}
		return now.Add(dur), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: --not-after %q is neither RFC 3339 nor +DURATION", errUsage, s)
	}
	return t, nil
}

func (c *CLI) cmdGrantIssue(args []string) error {
	fs := flag.NewFlagSet("grant issue", flag.ContinueOnError)
	store := storeFlag(fs)
	ctrl := fs.String("controller", "", "the controller `C`")
	app := fs.String("application", "", "the application `A`")
	var ops listFlag
	fs.Var(&ops, "operations", "operation id `PATTERN` (path.Match; repeatable or comma-separated; none means all)")
	price := fs.Uint64("price", 0, "credits per invocation")
	dprice := fs.Uint64("discovery-price", 0, "credits per discovery (0: free, no payer callback)")
	perDay := fs.Uint64("per-day", 0, "admitted requests per UTC day (at least 1)")
	notAfter := fs.String("not-after", "", "expiry `TIME`: RFC 3339, or +DURATION from now")
	if _, err := c.parse(fs, commands()["grant issue"].usage, args, 0); err != nil {
		return err
	}
	if *ctrl == "" || *app == "" || *notAfter == "" {
		return fmt.Errorf("%w: --controller, --application and --not-after are required", errUsage)
	}
	na, err := parseTime(*notAfter, time.Now())
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, AdminRequest{Op: OpGrantIssue, Grant: &AdminGrant{
		Controller: *ctrl, Application: *app, Operations: ops, Price: *price, DiscoveryPrice: *dprice,
		PerDay: *perDay, NotAfter: na.UnixMilli(),
	}})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, rep.Grant.ID)
	return nil
}

func (c *CLI) cmdGrantRevoke(args []string) error {
	fs := flag.NewFlagSet("grant revoke", flag.ContinueOnError)
	store := storeFlag(fs)
	pos, err := c.parse(fs, commands()["grant revoke"].usage, args, 1)
	if err != nil {
		return err
	}
	if _, err := c.admin(*store, AdminRequest{Op: OpGrantRevoke, Name: pos[0]}); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "grant %s revoked\n", pos[0])
	return nil
}

func (c *CLI) cmdGrantList(args []string) error {
	fs := flag.NewFlagSet("grant list", flag.ContinueOnError)
	store := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, commands()["grant list"].usage, args, 0); err != nil {
		return err
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	gs := s.Grants()
	if *asJSON {
		return c.printJSON(gs)
	}
	for _, g := range gs {
		state := "in force"
		if g.Revoked {
			state = "revoked"
		}
		ops := strings.Join(g.Operations, ",")
		if ops == "" {
			ops = "*"
		}
		fmt.Fprintf(c.Stdout, "%s\t%s -> %s [%s]\tprice %d, discovery %d, %d/%d today, until %s, %s\n",
			g.ID, g.Controller, g.Application, ops, g.Price, g.DiscoveryPrice, g.UsedToday, g.PerDay, g.NotAfter, state)
	}
	return nil
}

func (c *CLI) cmdRouteRegister(args []string) error {
	fs := flag.NewFlagSet("route register", flag.ContinueOnError)
	store := storeFlag(fs)
	pos, err := c.parse(fs, commands()["route register"].usage, args, 3)
	if err != nil {
		return err
	}
	b, err := readBounded(pos[2], maxRouteRequest)
	if err != nil {
		return err
	}
	req, err := ParseRouteRequest(b)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, AdminRequest{Op: OpRouteRegister, Name: pos[0], App: pos[1], Route: &req})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "route %s revision %d selected: %s\n", rep.Route.Route, rep.Route.Revision, rep.Route.ID)
	return nil
}

func (c *CLI) cmdRouteList(args []string) error {
	fs := flag.NewFlagSet("route list", flag.ContinueOnError)
	store := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, commands()["route list"].usage, args, 0); err != nil {
		return err
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	rs := s.Routes()
	if *asJSON {
		return c.printJSON(rs)
	}
	for _, r := range rs {
		fmt.Fprintf(c.Stdout, "%s\trevision %d of %d\t%s -> %s\tcontroller %s\tforward %s\n", r.Route, r.Revision, r.Revisions, r.Application, r.Upstream, r.Controller, r.Forward)
	}
	return nil
}

func (c *CLI) cmdRouteShow(args []string) error {
	fs := flag.NewFlagSet("route show", flag.ContinueOnError)
	store := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, commands()["route show"].usage, args, 1)
	if err != nil {
		return err
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	revs, err := s.Route(pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(revs)
	}
	for _, r := range revs {
		fmt.Fprintf(c.Stdout, "revision %d %s replaces %q: app %s upstream %s forward %s reverse %s prefix %s connect %dms response %dms issued %s\n",
			r.Revision, r.ID, r.Replaces, r.Application, r.Upstream, r.Forward, r.Reverse, r.Prefix, r.Timeouts.ConnectMs, r.Timeouts.ResponseMs, r.IssuedAt)
	}
	return nil
}

func (c *CLI) cmdBundleBuild(args []string) error {
	fs := flag.NewFlagSet("bundle build", flag.ContinueOnError)
	store := storeFlag(fs)
	out := fs.String("out", "", "write the bundle to `FILE`")
	hostUID := fs.Int64("host-uid", int64(os.Geteuid()), "the host daemon's OS account `UID`")
	pos, err := c.parse(fs, commands()["bundle build"].usage, args, 1)
	if err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out FILE is required", errUsage)
	}
	if err := needStore(*store); err != nil {
		return err
	}
	// The bundle is signed with the private key, read from the store; the
	// state may be read without the lock, so this works while serve runs.
	key, err := wire.ReadHybridKey(*store + "/" + keyFile)
	if err != nil {
		return err
	}
	s, err := OpenReadOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	if !key.Public().Equal(s.pub) {
		return fmt.Errorf("%s does not match %s", keyFile, pubFile)
	}
	s.key = key
	b, err := s.BuildBundle(pos[0], uint32(*hostUID))
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "bundle for %s written to %s (%d bytes)\n", pos[0], *out, len(b))
	return nil
}

func (c *CLI) cmdReceiptsVerify(args []string) error {
	fs := flag.NewFlagSet("receipts verify", flag.ContinueOnError)
	store := storeFlag(fs)
	from := fs.Uint64("from", 1, "check signatures from receipt `SEQ`")
	file := fs.String("file", "", "verify an exported receipts `FILE` instead of a store")
	hostKey := fs.String("host-key", "", "with --file: require this host public key `FILE` (operator.pub)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, commands()["receipts verify"].usage, args, 0); err != nil {
		return err
	}
	var rep ReceiptReport
	var err error
	if *file != "" {
		b, rerr := readBounded(*file, 1<<30)
		if rerr != nil {
			return rerr
		}
		var pinned *wire.HybridPublicKey
		if *hostKey != "" {
			kb, kerr := readBounded(*hostKey, 64<<10)
			if kerr != nil {
				return kerr
			}
			if pinned, kerr = wire.ParseHybridPublicKey(kb); kerr != nil {
				return kerr
			}
		}
		rep, err = VerifyReceiptsFile(b, pinned)
	} else {
		s, oerr := readOnly(*store)
		if oerr != nil {
			return oerr
		}
		defer s.Close()
		rep, err = s.VerifyReceipts(*from)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(rep)
	}
	fmt.Fprintf(c.Stdout, "%d receipts verified, chain head %s; %d checkpoints cover receipts 1..%d; %d not yet covered\n",
		rep.Receipts, rep.Head, rep.Checkpoints, rep.CoveredThrough, rep.Uncovered)
	for _, p := range rep.Purses {
		fmt.Fprintf(c.Stdout, "purse %s: funded %d, charged %d, balance %d, %d receipts add up\n", p.Controller, p.Funded, p.Charged, p.Balance, p.Receipts)
	}
	return nil
}

func (c *CLI) cmdReceiptsExport(args []string) error {
	fs := flag.NewFlagSet("receipts export", flag.ContinueOnError)
	store := storeFlag(fs)
	out := fs.String("out", "", "write the receipts to `FILE`")
	if _, err := c.parse(fs, commands()["receipts export"].usage, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out FILE is required", errUsage)
	}
	s, err := readOnly(*store)
	if err != nil {
		return err
	}
	defer s.Close()
	b, err := s.ExportReceipts()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "receipts written to %s\n", *out)
	return nil
}

func (c *CLI) cmdJournalInspect(args []string) error {
	fs := flag.NewFlagSet("journal inspect", flag.ContinueOnError)
	store := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, commands()["journal inspect"].usage, args, 0); err != nil {
		return err
	}
	if err := needStore(*store); err != nil {
		return err
	}
	sum, err := journal.Inspect(*store + "/" + journalDir)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(sum)
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, string(b))
	return nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s exceeds the bound of %d bytes", ErrRefused, path, limit)
	}
	return b, nil
}
