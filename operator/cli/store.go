package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
)

func (c *CLI) cmdInit(args []string) error {
	fs, store := flags("init")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if err := needStore(*store); err != nil {
		return err
	}
	pub, err := operator.Init(*store)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "store %s created; operator key %s\n", *store, pub.KID())
	return nil
}

func (c *CLI) cmdControllerAdd(args []string) error {
	fs, store := flags("controller add")
	uid := fs.Int64("uid", -1, "the controller's OS account `UID`")
	keys := fs.String("keys", "", "the controller's public keys `FILE` (steward-controller keys init)")
	control := fs.String("control", "", "the controller's control socket `PATH`, where the host answers its live routes")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *uid < 0 || *uid > 1<<32-2 || *keys == "" || *control == "" {
		return fmt.Errorf("%w: --uid UID, --keys FILE and --control PATH are required", errUsage)
	}
	b, err := readBounded(*keys, 64<<10)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpControllerAdd, Name: pos[0], UID: uint32(*uid), Keys: b, Control: *control})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "controller %s pinned: uid %d, tool key %s, dispatch key %s, control socket %s\n", rep.Controller.Name, rep.Controller.UID, rep.Controller.ToolKID, rep.Controller.DispatchKID, rep.Controller.Control)
	fmt.Fprintf(c.Stdout, "controller %s: %s\n", rep.Controller.Name, listenedLine(rep))
	return nil
}

// listenedLine says when the host answers on a control socket a command
// recorded: at once when it ran on the running host (its admin socket),
// else from the host's start.
func listenedLine(rep admin.Reply) string {
	if rep.ControlListened {
		return "the running host listens on " + rep.Controller.Control + " now"
	}
	return "the host listens on " + rep.Controller.Control + " when it starts"
}

// cmdControllerControl journals a controller's control socket: one added
// before `controller add` recorded one (`bundle build` needs it), or a new
// one. Through the running host the new socket is listened on at once and
// the old one closed.
func (c *CLI) cmdControllerControl(args []string) error {
	fs, store := flags("controller control")
	control := fs.String("control", "", "the controller's control socket `PATH`")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *control == "" {
		return fmt.Errorf("%w: --control PATH is required", errUsage)
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpControllerControl, Name: pos[0], Control: *control})
	if err != nil {
		return err
	}
	if rep.ControlUnchanged {
		fmt.Fprintf(c.Stdout, "controller %s: control socket %s already: nothing journaled\n", rep.Controller.Name, rep.Controller.Control)
		return nil
	}
	fmt.Fprintf(c.Stdout, "controller %s: control socket %s; %s\n", rep.Controller.Name, rep.Controller.Control, listenedLine(rep))
	return nil
}

func (c *CLI) cmdControllerList(args []string) error {
	return show(c, "controller list", args, 0, func(s *operator.Store, _ []string) ([]views.ControllerView, error) { return s.Controllers(), nil },
		func(cs []views.ControllerView) {
			for _, v := range cs {
				control := v.Control
				if control == "" {
					control = "(none: controller control)"
				}
				fmt.Fprintf(c.Stdout, "%s\tuid %d\ttool %s\tdispatch %s\tcontrol %s\n", v.Name, v.UID, v.ToolKID, v.DispatchKID, control)
			}
		})
}

func (c *CLI) purseCmd(name string, op string, args []string, npos int) error {
	fs, store := flags(name)
	pos, err := c.parse(fs, args, npos)
	if err != nil {
		return err
	}
	req := admin.Request{Op: op, Name: pos[0]}
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

func (c *CLI) printPurse(p views.PurseView) {
	state := "open"
	if p.Frozen {
		state = "FROZEN"
	}
	fmt.Fprintf(c.Stdout, "purse %s: balance %d (funded %d, charged %d, held %d), %s\n", p.Controller, p.Balance, p.Funded, p.Charged, p.Holds, state)
}

func (c *CLI) cmdPurseFund(args []string) error {
	return c.purseCmd("purse fund", admin.OpPurseFund, args, 2)
}

func (c *CLI) cmdPurseFreeze(args []string) error {
	return c.purseCmd("purse freeze", admin.OpPurseFreeze, args, 1)
}

func (c *CLI) cmdPurseThaw(args []string) error {
	return c.purseCmd("purse thaw", admin.OpPurseThaw, args, 1)
}

func (c *CLI) cmdPurseShow(args []string) error {
	return show(c, "purse show", args, 1, func(s *operator.Store, pos []string) (views.PurseView, error) { return s.PurseShow(pos[0]) }, c.printPurse)
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
			return time.Time{}, fmt.Errorf("%w: --not-after %q: %w", errUsage, s, err)
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
	fs, store := flags("grant issue")
	ctrl := fs.String("controller", "", "the controller `C`")
	app := fs.String("application", "", "the application `A`")
	var ops listFlag
	fs.Var(&ops, "operations", "operation id `PATTERN` (path.Match; repeatable or comma-separated; none means all)")
	price := fs.Uint64("price", 0, "credits per invocation")
	dprice := fs.Uint64("discovery-price", 0, "credits per discovery (0: free, no payer callback)")
	rprice := fs.Uint64("refusal-price", 0, "credits an application's answer other than 2xx costs (at most --price; 0: free)")
	perDay := fs.Uint64("per-day", 0, "admitted requests per UTC day (at least 1)")
	notAfter := fs.String("not-after", "", "expiry `TIME`: RFC 3339, or +DURATION from now")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if *ctrl == "" || *app == "" || *notAfter == "" {
		return fmt.Errorf("%w: --controller, --application and --not-after are required", errUsage)
	}
	na, err := parseTime(*notAfter, time.Now())
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpGrantIssue, Grant: &admin.Grant{
		Controller: *ctrl, Application: *app, Operations: ops, Price: *price, DiscoveryPrice: *dprice,
		RefusalPrice: *rprice, PerDay: *perDay, NotAfter: na.UnixMilli(),
	}})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, rep.Grant.ID)
	return nil
}

func (c *CLI) cmdGrantRevoke(args []string) error {
	fs, store := flags("grant revoke")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if _, err := c.admin(*store, admin.Request{Op: admin.OpGrantRevoke, Name: pos[0]}); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "grant %s revoked\n", pos[0])
	return nil
}

func (c *CLI) cmdGrantList(args []string) error {
	return show(c, "grant list", args, 0, func(s *operator.Store, _ []string) ([]views.GrantView, error) { return s.Grants(), nil },
		func(gs []views.GrantView) {
			for _, g := range gs {
				state := "in force"
				if g.Revoked {
					state = "revoked"
				}
				ops := strings.Join(g.Operations, ",")
				if ops == "" {
					ops = "*"
				}
				fmt.Fprintf(c.Stdout, "%s\t%s -> %s [%s]\tprice %d, discovery %d, refusal %d, %d/%d today, until %s, %s\n",
					g.ID, g.Controller, g.Application, ops, g.Price, g.DiscoveryPrice, g.RefusalPrice, g.UsedToday, g.PerDay, g.NotAfter, state)
			}
		})
}

func (c *CLI) cmdBundleBuild(args []string) error {
	fs, store := flags("bundle build")
	out := fs.String("out", "", "write the bundle to `FILE`")
	hostUID := fs.Int64("host-uid", int64(os.Geteuid()), "the host daemon's OS account `UID`")
	pos, err := c.parse(fs, args, 1)
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
	b, err := operator.BuildBundleReadOnly(*store, pos[0], uint32(*hostUID))
	if err != nil {
		return err
	}
	// The bundle is the controller's: `steward-installer bundle-install`
	// takes only a file private to the operator. It is 0600 whatever the
	// umask, and replaces (never writes through) what was at --out.
	if err := durable.WriteAtomic(*out, b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "bundle for %s written to %s (%d bytes)\n", pos[0], *out, len(b))
	return nil
}
