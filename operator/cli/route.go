package cli

import (
	"fmt"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
)

func (c *CLI) cmdRouteRegister(args []string) error {
	fs, store := flags("route register")
	inactive := fs.Bool("inactive", false, "register a new route inactive: not listened on until `route activate`")
	pos, err := c.parse(fs, args, 3)
	if err != nil {
		return err
	}
	b, err := readPrivate("route request", pos[2], views.MaxRouteRequest)
	if err != nil {
		return err
	}
	req, err := views.ParseRouteRequest(b)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpRouteRegister, Name: pos[0], App: pos[1], Route: &req,
		Inactive: *inactive, By: views.OwnAccount()})
	if err != nil {
		return err
	}
	r := rep.Route
	fmt.Fprintf(c.Stdout, "route %s revision %d selected: %s\n", r.Route, r.Revision, r.ID)
	if r.State == hostlog.RouteActive {
		fmt.Fprintf(c.Stdout, "route %s is active\n", r.Route)
	} else {
		fmt.Fprintf(c.Stdout, "route %s is %s: not listened on until steward-operator route activate %s\n", r.Route, r.State, r.Route)
	}
	return nil
}

func (c *CLI) cmdRouteActivate(args []string) error {
	return c.routeStateCmd("route activate", admin.OpRouteActivate, args)
}

func (c *CLI) cmdRouteDeactivate(args []string) error {
	return c.routeStateCmd("route deactivate", admin.OpRouteDeactivate, args)
}

func (c *CLI) cmdRouteRemove(args []string) error {
	return c.routeStateCmd("route remove", admin.OpRouteRemove, args)
}

// routeStateCmd runs one route state change: through the running host,
// which names the command's account from the admin connection's
// SO_PEERCRED, or on the store, as this process's account.
func (c *CLI) routeStateCmd(name, op string, args []string) error {
	fs, store := flags(name)
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: op, Name: pos[0], By: views.OwnAccount()})
	if err != nil {
		return err
	}
	r := rep.Route
	if rep.RouteUnchanged {
		fmt.Fprintf(c.Stdout, "route %s is %s already: nothing journaled\n", r.Route, r.State)
		return nil
	}
	fmt.Fprintf(c.Stdout, "route %s %s by %s at %s\n", r.Route, stateVerb[r.State], r.StateBy, r.StateAt)
	return nil
}

// stateVerb says what entering a route state is.
var stateVerb = map[hostlog.RouteState]string{hostlog.RouteActive: "activated", hostlog.RouteInactive: "deactivated", hostlog.RouteRemoved: "removed"}

// stateLine is a route's state as `route list` and `route show` print it.
func stateLine(r views.RouteView) string {
	if r.StateBy == "" {
		return string(r.State) + " (registered before route states)"
	}
	return fmt.Sprintf("%s (by %s at %s)", r.State, r.StateBy, r.StateAt)
}

func (c *CLI) cmdRouteList(args []string) error {
	return show(c, "route list", args, 0, func(s *operator.Store, _ []string) ([]views.RouteView, error) { return s.Routes(), nil },
		func(rs []views.RouteView) {
			for _, r := range rs {
				fmt.Fprintf(c.Stdout, "%s\t%s\trevision %d of %d\t%s -> %s\tcontroller %s\tforward %s\n",
					r.Route, stateLine(r), r.Revision, r.Revisions, r.Application, r.Upstream, r.Controller, r.Forward)
			}
		})
}

func (c *CLI) cmdRouteShow(args []string) error {
	return show(c, "route show", args, 1, func(s *operator.Store, pos []string) ([]views.RouteView, error) { return s.Route(pos[0]) },
		func(revs []views.RouteView) {
			// The state comes last: the revision lines keep their place
			// at the start, where scripts read revision 1's id.
			for _, r := range revs {
				account := r.AppAccount
				if account == "" {
					account = "(unchecked)"
				}
				fmt.Fprintf(c.Stdout, "revision %d %s replaces %q: app %s upstream %s account %s forward %s reverse %s prefix %s connect %dms response %dms issued %s\n",
					r.Revision, r.ID, r.Replaces, r.Application, r.Upstream, account, r.Forward, r.Reverse, r.Prefix, r.Timeouts.ConnectMs, r.Timeouts.ResponseMs, r.IssuedAt)
			}
			if len(revs) > 0 {
				fmt.Fprintf(c.Stdout, "route %s: %s\n", revs[0].Route, stateLine(revs[0]))
			}
		})
}
