package routetable

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The changes of the table an operator's command makes, and their replay:
// each command checks its change here, has its record journaled, then
// applies it (Add, SetState); replay checks the record as the command
// checked it, so the journal rebuilds what the commands did.

// ErrUnchanged is a change of state's check (Change) finding the route in
// the state asked already: nothing is to be journaled.
var ErrUnchanged = errors.New("unchanged")

// NewRecord is the unsigned record of revision rev of route name for
// application app, as req asks; its caller sets when it is issued. A
// Replaces that is not hex is refused.
func NewRecord(name, app string, rev uint64, req views.RouteRequest) (msg.RouteRecord, error) {
	replaces, err := hex.DecodeString(req.Replaces)
	if err != nil {
		return msg.RouteRecord{}, views.Refusedf("route %s: replaces %q is not hex", name, req.Replaces)
	}
	if len(replaces) == 0 {
		replaces = nil
	}
	return msg.RouteRecord{
		Route: name, Revision: rev, Replaces: replaces, Application: app,
		Protocol: msg.ProtocolOracleOperationsV1, Controller: req.Controller,
		Upstream: req.Upstream, Forward: req.Forward, Reverse: req.Reverse, Prefix: req.Prefix,
		Timeouts: req.Timeouts, AppAccount: req.AppAccount,
	}, nil
}

// NextRevision is the revision number a new revision of route name has.
func (t *Table) NextRevision(name string) uint64 {
	if r := t.Routes[name]; r != nil {
		return uint64(len(r.Revs)) + 1
	}
	return 1
}

// Registration is the record that registers checked revision rec (signed,
// its RouteID id; CheckRevision) by by at the time now reads (unix ms, read
// once the check passed), and the revision the host must listen on once
// it is applied (nil: none new, the route is inactive).
func (t *Table) Registration(rec msg.RouteRecord, signed, id []byte, inactive bool, by string, now func() int64) (hostlog.RouteRegisterV2, *Rev, error) {
	state, err := t.RegisterState(rec, inactive)
	if err != nil {
		return hostlog.RouteRegisterV2{}, nil, err
	}
	body := hostlog.RouteRegisterV2{Record: signed, State: state, By: by, At: now()}
	var listen *Rev
	if state == hostlog.RouteActive {
		listen = &Rev{Record: rec, Signed: signed, ID: id}
	}
	return body, listen, nil
}

// Change is the record of route name's change to state to by by at the
// time now reads (unix ms, read once the check passed), the route, and
// the revision the host must listen on once it is applied (nil: none
// new). A route already in state to is ErrUnchanged; a removal while
// unresolved names attempts of the route is refused (UnresolvedRefusal).
func (t *Table) Change(name string, to hostlog.RouteState, by string, now func() int64, unresolved func(*Route) []string) (hostlog.RouteStateChange, *Route, *Rev, error) {
	r, err := t.CheckState(name, to)
	if err != nil {
		return hostlog.RouteStateChange{}, nil, nil, err
	}
	if r.State == to {
		return hostlog.RouteStateChange{}, r, nil, ErrUnchanged
	}
	if to == hostlog.RouteRemoved {
		if ids := unresolved(r); len(ids) > 0 {
			return hostlog.RouteStateChange{}, nil, nil, UnresolvedRefusal(name, ids)
		}
	}
	var listen *Rev
	if to == hostlog.RouteActive {
		sel := *r.Selected()
		listen = &sel
	}
	return hostlog.RouteStateChange{Route: name, State: to, By: by, At: now()}, r, listen, nil
}

// Replayed is the state mark a route-register.v2 record b gives the
// revision rec it registers, which CheckRevision passed: replay holds it
// to what the command that wrote it checked (RegisterState).
func (t *Table) Replayed(rec msg.RouteRecord, b *hostlog.RouteRegisterV2) (StateMark, error) {
	if b.By == "" {
		return StateMark{}, fmt.Errorf("route %s: the registration names no one", rec.Route)
	}
	want, err := t.RegisterState(rec, b.State == hostlog.RouteInactive)
	if err != nil {
		return StateMark{}, err
	}
	if b.State != want {
		return StateMark{}, fmt.Errorf("route %s: registered %q, but the route is %s", rec.Route, b.State, want)
	}
	return StateMark{State: b.State, By: b.By, At: b.At}, nil
}

// ReplayChange applies an operator's change of a route's state, record
// b. The check is the state's own (CheckState); that a removed route had
// no unresolved attempt was the command's check when it ran, not
// something the journal's order could show again.
func (t *Table) ReplayChange(b *hostlog.RouteStateChange) error {
	if b.By == "" {
		return fmt.Errorf("route %s: the state change names no one", b.Route)
	}
	r, err := t.CheckState(b.Route, b.State)
	if err != nil {
		return err
	}
	if r.State == b.State {
		return fmt.Errorf("route %s: changed to %s, which it already is", b.Route, b.State)
	}
	t.SetState(r, StateMark{State: b.State, By: b.By, At: b.At})
	return nil
}
