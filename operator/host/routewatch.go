package host

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The route table pushed (msg.RoutesWatch; DESIGN.md section 2, "The route
// table, pushed"). A controller holds one routes-watch outstanding on its
// control channel, naming the table it holds; the host answers when its
// own table for that controller differs, and a call on the controller
// reads its route from memory, with no frame. Two races are closed here:
//
//   - A change made while no watch is held (the controller is applying the
//     last answer): the watch that follows names the old table, so it is
//     answered at once.
//   - A call that reaches the controller after a route change returned
//     but before the controller applied it: a route change returns only
//     once every controller whose watch is live has sent a watch naming the
//     new table, i.e. has applied it (awaitRouteAcks), bounded by
//     routesAckWait. A controller that does not say so in time is logged;
//     a dispatch on a route no longer active is still refused by the host.

// routesWatchIdle is how long the host holds a watch whose controller's
// table does not change: its answer, the same table, has the controller
// watch again, so a channel that died unnoticed is found within it.
const routesWatchIdle = 20 * time.Second

// routesAckWait bounds how long a route change waits for the watching
// controllers to hold the new table.
const routesAckWait = 2 * time.Second

// routeWatchers are the controllers watching their route tables.
type routeWatchers struct {
	// mu guards the fields that follow.
	mu      sync.Mutex
	changed chan struct{}       // closed by the next route change
	acked   chan struct{}       // closed by the next watch request
	holds   map[string][][]byte // controller -> the table its latest watch named, while it watches
	held    map[string]int      // controller -> its watches held now
}

// changedCh is the channel the next route change closes.
func (w *routeWatchers) changedCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// routesChanged wakes every held watch.
func (w *routeWatchers) routesChanged() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// arrived records controller's watch naming the table active, and wakes
// a route change waiting for it; done ends the watch's hold.
func (w *routeWatchers) arrived(controller string, active [][]byte) (done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds == nil {
		w.holds, w.held = map[string][][]byte{}, map[string]int{}
	}
	w.holds[controller] = active
	w.held[controller]++
	if w.acked != nil {
		close(w.acked)
		w.acked = nil
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.held[controller]--
	}
}

// gone forgets controller's watch: its channel closed while a watch was
// held, so no route change waits for it.
func (w *routeWatchers) gone(controller string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[controller] == 0 {
		delete(w.holds, controller)
		delete(w.held, controller)
	}
}

// behind lists the watching controllers whose latest watch names a table
// other than current's, and the channel the next watch request closes.
func (w *routeWatchers) behind(current func(controller string) [][]byte) ([]string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.acked == nil {
		w.acked = make(chan struct{})
	}
	var out []string
	for ctrl, active := range w.holds {
		if !sameIDs(active, current(ctrl)) {
			out = append(out, ctrl)
		}
	}
	slices.Sort(out)
	return out, w.acked
}

func sameIDs(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y []byte) bool { return bytes.Equal(x, y) })
}

// answerRoutesWatch holds controller's watch until its table differs from
// the one the watch names, or routesWatchIdle passes, and answers the
// table as answerRoutes does.
func (h *Host) answerRoutesWatch(ctx context.Context, controller string, req *wire.Envelope) (string, any) {
	var q msg.RoutesWatch
	if err := req.Decode(&q); err != nil {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "routes-watch: " + err.Error()}
	}
	if len(q.Known) > msg.MaxKnownRoutes {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest,
			Reason: fmt.Sprintf("routes-watch: %d known route ids, the bound is %d", len(q.Known), msg.MaxKnownRoutes)}
	}
	if len(q.Active) > msg.MaxSelectedRoutes {
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest,
			Reason: fmt.Sprintf("routes-watch: %d active route ids, the bound is %d", len(q.Active), msg.MaxSelectedRoutes)}
	}
	known := make(map[string]bool, len(q.Known))
	for _, id := range q.Known {
		known[string(id)] = true
	}
	defer h.watch.arrived(controller, q.Active)()
	idle := time.NewTimer(routesWatchIdle)
	defer idle.Stop()
	for {
		// The channel is taken before the table is read: a change after
		// the read closes it.
		changed := h.watch.changedCh()
		res := h.s.RouteTable(controller, known)
		if !sameIDs(res.Active, q.Active) {
			return msg.TypeRoutesResult, res
		}
		select {
		case <-changed:
		case <-idle.C:
			return msg.TypeRoutesResult, res
		case <-ctx.Done():
			h.watch.gone(controller)
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeUnavailable, Reason: "routes-watch: the channel is closing"}
		}
	}
}

// awaitRouteAcks waits, after a route change, until every watching
// controller has sent a watch naming its new table, or routesAckWait.
func (h *Host) awaitRouteAcks() {
	h.watch.routesChanged()
	deadline := time.NewTimer(routesAckWait)
	defer deadline.Stop()
	current := func(ctrl string) [][]byte { return h.s.RouteTable(ctrl, nil).Active }
	for {
		behind, acked := h.watch.behind(current)
		if len(behind) == 0 {
			return
		}
		select {
		case <-acked:
		case <-deadline.C:
			h.log.Warn("steward-operator: a route change took effect, but a controller did not confirm its new route table in time; a dispatch on a route no longer active is still refused",
				"controllers", behind, "waited", routesAckWait)
			return
		}
	}
}
