package controller

import (
	"context"
	"slices"
	"strings"

	"github.com/stewardrt/steward/wire/msg"
)

// This file stands in for the live route table (P17.md section B, the
// "liveroutes" piece) on the addresses branch only, so that the tools
// compile against the two functions that piece provides; it reads the
// bundle's static routes. The lead deletes it at merge.

// routeOf is the route of application app.
func (c *Controller) routeOf(_ context.Context, app string) (msg.RouteRecord, error) {
	if app == "" {
		return msg.RouteRecord{}, argErr("application: missing")
	}
	r, ok := c.bind.Routes[app]
	if !ok {
		return msg.RouteRecord{}, argErr("application: %q is not a configured application", app)
	}
	return r, nil
}

// liveRoutes is every route the controller may use, sorted by application.
func (c *Controller) liveRoutes(_ context.Context) ([]msg.RouteRecord, error) {
	var rs []msg.RouteRecord
	for _, r := range c.bind.Routes {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b msg.RouteRecord) int { return strings.Compare(a.Application, b.Application) })
	return rs, nil
}
