package controller

import (
	"context"
	"slices"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// The route table pushed (DESIGN.md section 2, "The route table, pushed").
// The controller holds one routes-watch outstanding on its control channel
// naming the table it holds (msg.RoutesWatch); the host answers when its
// table for this controller differs, and the watch applies the answer with
// the same checks as a lookup (routeTable.update) and watches again at once,
// naming the new table: that next watch is the controller's word to the
// host that it holds the new table, which a route change waits for before
// it returns. While the watch is live a call reads its route from the
// table with no frame; once the watch fails, every call asks the host again
// (liveroutes.go) until a watch is answered.

// routesWatchRetry is how long the watch waits before watching again after
// a failure (the host is down or restarting): calls meanwhile ask the host
// themselves, so nothing waits on it.
const routesWatchRetry = time.Second

// startRouteWatch runs watchRoutes until ctx ends; the func it returns
// calls cancel (ctx's) and waits for it.
func (c *Controller) startRouteWatch(ctx context.Context, cancel func()) func() {
	done := make(chan struct{})
	go func() { c.watchRoutes(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// watchRoutes keeps the route table watched until ctx ends.
func (c *Controller) watchRoutes(ctx context.Context) {
	failing := false
	for ctx.Err() == nil {
		err := c.watchOnce(ctx)
		if err == nil {
			if failing {
				c.log.Info("the host's route table is pushed again")
			}
			failing = false
			continue
		}
		c.routes.unwatch()
		if ctx.Err() != nil {
			return
		}
		if !failing {
			c.log.Warn("the host's route table is not pushed; each call looks its route up until it is", "err", err)
		}
		failing = true
		t := time.NewTimer(routesWatchRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// watchOnce sends one watch and applies its answer.
func (c *Controller) watchOnce(ctx context.Context) error {
	known, active := c.routes.watchState()
	env, _, err := c.ctl.call(ctx, msg.TypeRoutesWatch, msg.RoutesWatch{Known: known, Active: active})
	if err != nil {
		return err
	}
	if env.T != msg.TypeRoutesResult {
		var r msg.Refusal
		env.Decode(&r)
		return &unavailableError{"the host answered a routes-watch with " + env.T + ": " + r.Reason}
	}
	var res msg.RoutesResult
	if err := env.Decode(&res); err != nil {
		return err
	}
	if _, err := c.routes.update(c, res); err != nil {
		return err
	}
	c.routes.markWatched()
	return nil
}

// routesPushed is the pushed table while it is watched and the control
// channel that pushes it has not failed: a host that just went away has
// its table looked up (and refused) as before, not trusted.
func (c *Controller) routesPushed() ([]msg.RouteRecord, bool) {
	if !c.ctl.live() {
		return nil, false
	}
	return c.routes.pushed()
}

// pushed is the table's routes while it is watched.
func (t *routeTable) pushed() ([]msg.RouteRecord, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.watched {
		return nil, false
	}
	return slices.Clone(t.offered), true
}

// watchState is what a watch names: the records held and the table's ids.
func (t *routeTable) watchState() (known, active [][]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	known = make([][]byte, 0, len(t.checked))
	for id := range t.checked {
		known = append(known, []byte(id))
	}
	return known, t.active
}

func (t *routeTable) markWatched() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watched = true
	select {
	case <-t.firstWatch:
	default:
		close(t.firstWatch)
	}
}

func (t *routeTable) unwatch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watched = false
}

func (t *routeTable) counted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lookups++
}

// lookupCount is how many routes lookups the table has sent.
func (t *routeTable) lookupCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lookups
}
