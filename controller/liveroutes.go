package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// The live route table. The host's signed route records are the one
// authority on which applications this controller reaches: the config
// lists none. The controller asks the host's control socket for its
// active routes on every tool call that needs a route and on every
// overview, so a route the operator activates is found by the next call
// and one deactivated or removed stops being offered, with no restart and
// no new MCP session. A lookup is one small round trip on a kept channel:
// the controller names the records it has already verified (Known) and
// the host sends only the others' bytes. Each new record is verified once
// with the bundle's host key and checked (this controller's, speaking
// oracle-operations-v1, a valid prefix), and kept while the host keeps
// offering it.

// routesUnavailable is the refusal of a tool call whose route could not
// be looked up: the host's control socket did not answer. Nothing was
// journaled and nothing was sent to any application.
const routesUnavailable = "the host cannot be reached to look up its applications now; nothing was journaled or sent"

// routesLookupTimeout bounds one lookup, dial included: the host is on
// this machine and answers from memory, so a lookup that takes longer is a
// host that cannot serve the call now.
const routesLookupTimeout = 2 * time.Second

// unavailableError is a refusal with code unavailable: the host could not
// be asked. The tools answer it as msg.CodeUnavailable (planRefusal).
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

// planRefusal is the tool result of a call plan refused: unavailable when
// the host could not be asked for the route, bad-request otherwise.
func planRefusal(err error) *ToolResult {
	var ue *unavailableError
	if errors.As(err, &ue) {
		return refused(msg.CodeUnavailable, ue.reason, "")
	}
	return refused(msg.CodeBadRequest, err.Error(), "")
}

// checkedRoute is what checking one signed route record found: the record,
// or why it is left out of the table (logged once, when first checked).
type checkedRoute struct {
	rec msg.RouteRecord
	out error // non-nil: not offered
	// second marks a record left out as its application's second active
	// route, logged when first found so.
	second bool
}

// forwardKey names one revision of one route: a new revision is a new
// forward channel (its socket may differ), the old one retired.
type forwardKey struct {
	route    string
	revision uint64
}

func keyOf(r msg.RouteRecord) forwardKey { return forwardKey{r.Route, r.Revision} }

// routeTable holds the checked records of the host's last answer, by
// RouteID, and the forward channels of routes, by revision.
type routeTable struct {
	mu      sync.Mutex
	checked map[string]checkedRoute // RouteID -> its record, for the ids of the last answer
	current map[forwardKey]bool     // the routes the last answer offered
	fwd     map[forwardKey]*forward
	active  [][]byte          // the last answer's Active, in the host's order: what a watch names
	offered []msg.RouteRecord // the routes the last answer offered, by application
	// watched is true while the host pushes this table (routewatch.go):
	// calls then read offered with no lookup.
	watched bool
	// firstWatch is closed when the table is first watched (tests wait
	// on it: newRouteTable makes it).
	firstWatch chan struct{}
	// lookups counts the routes frames sent (a call's or an overview's
	// lookup), for the tests that show a watched table sends none.
	lookups int
}

func newRouteTable() routeTable {
	return routeTable{checked: map[string]checkedRoute{}, current: map[forwardKey]bool{}, fwd: map[forwardKey]*forward{}, firstWatch: make(chan struct{})}
}

// liveRoutes is this controller's active routes, those it may use, sorted
// by application: the table the host pushes while it is watched, else
// asked of the host now. A host that cannot be
// asked, or whose answer cannot be used, is an *unavailableError.
func (c *Controller) liveRoutes(ctx context.Context) ([]msg.RouteRecord, error) {
	if routes, ok := c.routesPushed(); ok {
		return routes, nil
	}
	return c.lookupRoutes(ctx)
}

// lookupRoutes asks the host for this controller's active routes now.
func (c *Controller) lookupRoutes(ctx context.Context) ([]msg.RouteRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, routesLookupTimeout)
	defer cancel()
	c.routes.counted()
	env, _, err := c.ctl.call(ctx, msg.TypeRoutes, msg.Routes{Known: c.routes.known()})
	if err != nil {
		c.log.Warn("the host's control socket did not answer a route lookup", "err", err)
		return nil, &unavailableError{routesUnavailable}
	}
	switch env.T {
	case msg.TypeRoutesResult:
		var res msg.RoutesResult
		if err := env.Decode(&res); err != nil {
			c.log.Error("the host's route answer is malformed", "err", err)
			return nil, &unavailableError{routesUnavailable}
		}
		return c.routes.update(c, res)
	case msg.TypeRefused:
		var r msg.Refusal
		env.Decode(&r)
		c.log.Error("the host refused a route lookup", "code", r.Code, "reason", r.Reason)
		return nil, &unavailableError{routesUnavailable}
	default:
		c.log.Error("the host answered a route lookup with an unexpected frame", "type", env.T)
		return nil, &unavailableError{routesUnavailable}
	}
}

// routeOf is the live route of application app: from the pushed table
// while it is watched, else (and for an application it does not hold, so
// that none is refused on a table a moment old) asked of the host now.
func (c *Controller) routeOf(ctx context.Context, app string) (msg.RouteRecord, error) {
	if app == "" {
		return msg.RouteRecord{}, argErr("application: missing")
	}
	if routes, ok := c.routesPushed(); ok {
		for _, r := range routes {
			if r.Application == app {
				return r, nil
			}
		}
	}
	routes, err := c.lookupRoutes(ctx)
	if err != nil {
		return msg.RouteRecord{}, err
	}
	for _, r := range routes {
		if r.Application == app {
			return r, nil
		}
	}
	return msg.RouteRecord{}, argErr("application: %q is not an application of this controller (steward_overview lists them)", app)
}

// known is the RouteIDs of the records the table holds checked.
func (t *routeTable) known() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([][]byte, 0, len(t.checked))
	for id := range t.checked {
		ids = append(ids, []byte(id))
	}
	return ids
}

// update applies one routes answer: checks the records it carries, keeps
// those of its active ids only (so Known stays under msg.MaxKnownRoutes),
// retires the forward channels of routes it no longer offers, and returns
// the routes offered, sorted by application.
func (t *routeTable) update(c *Controller, res msg.RoutesResult) ([]msg.RouteRecord, error) {
	if len(res.Active) > msg.MaxSelectedRoutes {
		c.log.Error("the host's route answer names more active routes than the bound", "active", len(res.Active), "bound", msg.MaxSelectedRoutes)
		return nil, &unavailableError{routesUnavailable}
	}
	active := make(map[string]bool, len(res.Active))
	for _, id := range res.Active {
		active[string(id)] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, signed := range res.Records {
		id := string(msg.RouteID(signed))
		if !active[id] {
			c.log.Error("the host's route answer carries a record that is not active", "routeId", fmt.Sprintf("%x", id))
			return nil, &unavailableError{routesUnavailable}
		}
		if _, ok := t.checked[id]; !ok {
			t.checked[id] = c.checkRoute(signed)
		}
	}
	var routes []msg.RouteRecord
	apps := map[string]bool{}
	for _, id := range res.Active {
		cr, ok := t.checked[string(id)]
		if !ok {
			c.log.Error("the host's route answer lacks the record of an active route", "routeId", fmt.Sprintf("%x", id))
			return nil, &unavailableError{routesUnavailable}
		}
		if cr.out != nil {
			continue
		}
		if apps[cr.rec.Application] {
			// The host offers at most one active route an application;
			// its order decides which one this controller uses.
			if !cr.second {
				cr.second = true
				t.checked[string(id)] = cr
				c.log.Warn("the host offers a second route for an application; the first in its order is used",
					"route", cr.rec.Route, "application", cr.rec.Application)
			}
			continue
		}
		apps[cr.rec.Application] = true
		routes = append(routes, cr.rec)
	}
	for id := range t.checked {
		if !active[id] {
			delete(t.checked, id)
		}
	}
	t.current = make(map[forwardKey]bool, len(routes))
	for _, r := range routes {
		t.current[keyOf(r)] = true
	}
	for k, f := range t.fwd {
		f.retired = !t.current[k]
		if f.retired && f.users == 0 {
			f.close()
			delete(t.fwd, k)
		}
	}
	slices.SortFunc(routes, func(a, b msg.RouteRecord) int { return strings.Compare(a.Application, b.Application) })
	t.active, t.offered = res.Active, routes
	return slices.Clone(routes), nil
}

// checkRoute verifies one signed record with the bundle's host key and
// checks that this controller may use it; a record it may not use is left
// out, and logged here, once.
func (c *Controller) checkRoute(signed []byte) checkedRoute {
	r, err := msg.VerifyRoute(signed, c.bind.HostKey)
	switch {
	case err != nil:
		err = fmt.Errorf("its signature does not verify with the bundle's host key: %w", err)
	case r.Controller != c.cfg.Name:
		err = fmt.Errorf("it is controller %q's, not this controller's", r.Controller)
	case r.Protocol != msg.ProtocolOracleOperationsV1:
		err = fmt.Errorf("it speaks %q, which this controller does not (only %s)", r.Protocol, msg.ProtocolOracleOperationsV1)
	default:
		if err = ctlconf.ValidateName("application", r.Application); err == nil {
			err = oracleops.ValidatePrefix(r.Prefix)
		}
	}
	if err != nil {
		c.log.Warn("a route the host offers is left out", "route", r.Route, "application", r.Application, "why", err.Error())
		return checkedRoute{rec: r, out: err}
	}
	return checkedRoute{rec: r}
}

// useForward returns the forward channel of route r, made when none is
// open, and counts one more dispatch using it; release ends that use.
// A channel whose route has left the table is closed by the release of
// its last use.
func (c *Controller) useForward(r msg.RouteRecord) (*forward, func()) {
	t := &c.routes
	t.mu.Lock()
	defer t.mu.Unlock()
	k := keyOf(r)
	f := t.fwd[k]
	if f == nil {
		f = newForward(c, r)
		f.retired = !t.current[k]
		t.fwd[k] = f
	}
	f.users++
	return f, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		f.users--
		if f.retired && f.users == 0 {
			f.close()
			if t.fwd[k] == f {
				delete(t.fwd, k)
			}
		}
	}
}

// reachable reports whether route r's forward channel can be had now.
func (c *Controller) reachable(ctx context.Context, r msg.RouteRecord) bool {
	f, release := c.useForward(r)
	defer release()
	_, err := f.client(ctx)
	return err == nil
}

// closeAll closes every forward channel (the controller is closing: no
// dispatch is running).
func (t *routeTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, f := range t.fwd {
		f.close()
		delete(t.fwd, k)
	}
}
