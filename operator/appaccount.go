package operator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os/user"
	"strconv"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// maxAppAccount bounds a route's application account name: the longest
// account name useradd accepts.
const maxAppAccount = 32

// validAppAccount checks a route's AppAccount: empty (a route that names
// no account, dialled unchecked), or 1 to 32 of A-Za-z0-9._-, first a letter
// or '_', as useradd accepts; never all digits, so a name is never read as
// a uid. Whether the account exists is the host's question when it dials:
// a route may be registered before its application's account is made.
func validAppAccount(route, name string) error {
	if name == "" {
		return nil
	}
	if len(name) > maxAppAccount {
		return Refusedf("route %s: application account %s: must be 1 to %d bytes", route, strconv.Quote(trunc(name, 40)), maxAppAccount)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '.' || c == '-')) {
			return Refusedf("route %s: application account %s: only A-Za-z0-9._- allowed, first a letter or '_'", route, strconv.Quote(name))
		}
	}
	return nil
}

// errAppAccount wraps every failure of the check that the application's
// socket is served by the route's application account.
var errAppAccount = errors.New("the application's account check failed")

// appUID resolves the route's application account to its uid, from the
// host's account database (os/user), at every dial: an account removed or
// renumbered since the route was loaded is seen at once.
func appUID(rt *msg.RouteRecord) (uint32, error) {
	u, err := user.Lookup(rt.AppAccount)
	if err != nil {
		return 0, fmt.Errorf("%w: route %s: application account %s: %w", errAppAccount, rt.Route, rt.AppAccount, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: route %s: application account %s: uid %q: %w", errAppAccount, rt.Route, rt.AppAccount, u.Uid, err)
	}
	return uint32(uid), nil
}

// dialApplication connects to the route's upstream socket. When the route
// names the application's account, the socket is checked as wire checks
// every custody socket (wire.Dial): a socket owned by that account's uid,
// under directories without symlinks that only root, the host or that
// account can change, and after connecting SO_PEERCRED must name that uid.
// A failed check wraps errAppAccount and names the path (for the host's log
// only). A route without an account is dialled unchecked, as before
// accounts were recorded (the host warned once when it loaded the route).
func dialApplication(ctx context.Context, rt *msg.RouteRecord) (net.Conn, error) {
	if rt.AppAccount == "" {
		var d net.Dialer
		return d.DialContext(ctx, "unix", rt.Upstream)
	}
	uid, err := appUID(rt)
	if err != nil {
		return nil, err
	}
	conn, err := wire.Dial(ctx, rt.Upstream, uid, uid)
	switch {
	case err == nil:
		return conn, nil
	case errors.Is(err, fs.ErrNotExist), !errors.Is(err, wire.ErrUnsafePath) && !errors.Is(err, wire.ErrWrongPeer):
		return nil, err // not there, or not listening: not reached
	default:
		return nil, fmt.Errorf("%w: route %s: application account %s (uid %d): %w", errAppAccount, rt.Route, rt.AppAccount, uid, err)
	}
}

// CheckRouteAccount logs, as the host listens for route rt, what it will
// check of its application: a route without an application account is
// dialled unchecked (a warning, once), and one whose account does not
// resolve now has its calls end not-sent until it does (an error; the
// host still serves its other routes, and the account may be made later).
func (s *Store) CheckRouteAccount(rt msg.RouteRecord) {
	if rt.AppAccount == "" {
		s.warnOnce("unchecked/"+rt.Route, "steward-operator: route names no application account: its upstream socket is dialled unchecked (no owner, path or SO_PEERCRED check); register a new revision with appAccount",
			"route", rt.Route, "application", rt.Application, "upstream", rt.Upstream)
		return
	}
	if _, err := appUID(&rt); err != nil {
		s.log.Error("steward-operator: the route's application account does not resolve; its calls end not-sent until it does", "route", rt.Route, "err", err)
	}
}
