package routetable

import (
	"bytes"
	"encoding/hex"
	"time"

	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// View is route r's selected revision as the host's commands show it.
func (r *Route) View() views.RouteView {
	sel := r.Selected()
	rec := sel.Record
	return views.RouteView{
		Route: rec.Route, Revision: rec.Revision, Revisions: len(r.Revs), ID: hex.EncodeToString(sel.ID),
		Replaces: hex.EncodeToString(rec.Replaces), Application: rec.Application, Controller: rec.Controller,
		Upstream: rec.Upstream, Forward: rec.Forward, Reverse: rec.Reverse, Prefix: rec.Prefix,
		Timeouts: rec.Timeouts, IssuedAt: time.UnixMilli(rec.IssuedAt).UTC().Format(time.RFC3339Nano),
		AppAccount: rec.AppAccount, State: r.State, StateBy: r.By, StateAt: r.Time(),
	}
}

// Views is the selected revision of every route, removed ones included,
// in the host's route order.
func (t *Table) Views() []views.RouteView {
	out := make([]views.RouteView, 0, len(t.RouteOrder))
	for _, n := range t.RouteOrder {
		out = append(out, t.Routes[n].View())
	}
	return out
}

// History is every revision of route name, oldest first, each with the
// route's state and its count of revisions.
func (t *Table) History(name string) ([]views.RouteView, error) {
	r, ok := t.Routes[name]
	if !ok {
		return nil, views.Refusedf("no route %s", name)
	}
	out := make([]views.RouteView, 0, len(r.Revs))
	for i := range r.Revs {
		v := (&Route{Name: name, Revs: r.Revs[:i+1], StateMark: r.StateMark}).View()
		v.Revisions = len(r.Revs)
		out = append(out, v)
	}
	return out, nil
}

// Signed is a copy of the signed bytes of route name's selected revision.
func (t *Table) Signed(name string) ([]byte, error) {
	r, ok := t.Routes[name]
	if !ok {
		return nil, views.Refusedf("no route %s", name)
	}
	return bytes.Clone(r.Selected().Signed), nil
}

// ForController is controller ctrl's live route table (msg.RoutesResult):
// the RouteIDs of its active routes in the host's order, and the signed
// records of those known does not hold. Routes of other controllers are
// never in it. The answer shares the revisions' bytes, which are never
// changed once registered: it may be held after the lock.
func (t *Table) ForController(ctrl string, known map[string]bool) msg.RoutesResult {
	revs := t.Active(ctrl)
	res := msg.RoutesResult{Active: make([][]byte, 0, len(revs))}
	for _, rv := range revs {
		res.Active = append(res.Active, rv.ID)
		if !known[string(rv.ID)] {
			res.Records = append(res.Records, rv.Signed)
		}
	}
	return res
}
