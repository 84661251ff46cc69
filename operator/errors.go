package operator

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// ErrRefused marks input the store refused: a bad name, an unknown
// controller, a fork of a route, a bound passed. The command exits 2.
var ErrRefused = errors.New("refused")

// Refusedf formats a one-line refusal wrapping ErrRefused: what the store,
// the admin language, the host and the command line each refuse of their
// input.
func Refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Name bounds: controller, application, route and grant names.
const maxNameLen = 64

// validName checks a name: 1 to 64 of A-Za-z0-9._-, first a letter or digit.
func validName(what, s string) error {
	if len(s) == 0 || len(s) > maxNameLen {
		return Refusedf("%s name %s: must be 1 to %d bytes", what, strconv.Quote(trunc(s, 80)), maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return Refusedf("%s name %s: only A-Za-z0-9._- allowed, first a letter or digit", what, strconv.Quote(trunc(s, 80)))
		}
	}
	return nil
}

// Grant pattern bounds.
const (
	maxPatterns   = 64
	maxPatternLen = 160
)

func validPatterns(ps []string) error {
	if len(ps) > maxPatterns {
		return Refusedf("%d operation patterns, the bound is %d", len(ps), maxPatterns)
	}
	for _, p := range ps {
		if p == "" || len(p) > maxPatternLen {
			return Refusedf("operation pattern %s: must be 1 to %d bytes", strconv.Quote(trunc(p, 80)), maxPatternLen)
		}
		if _, err := path.Match(p, ""); err != nil {
			return Refusedf("operation pattern %s: %v", strconv.Quote(p), err)
		}
	}
	return nil
}

// Route timeout bounds, in ms.
const (
	maxConnectMs  = 10_000
	maxResponseMs = 300_000
	maxPathLen    = 107 // sun_path holds 108 bytes with the NUL
)

// MaxDeliveryTime is the longest one delivery to an application may run:
// the longest connect and response timeouts a route may have. A
// redelivery, which no dispatch deadline bounds, runs at most this long.
const MaxDeliveryTime = (maxConnectMs + maxResponseMs) * time.Millisecond

func validRouteRecord(r msg.RouteRecord) error {
	if err := validName("application", r.Application); err != nil {
		return err
	}
	if r.Protocol != msg.ProtocolOracleOperationsV1 {
		return Refusedf("route %s: unknown protocol %s", r.Route, strconv.Quote(r.Protocol))
	}
	for _, p := range []struct{ what, path string }{{"upstream", r.Upstream}, {"forward", r.Forward}, {"reverse", r.Reverse}} {
		if !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return Refusedf("route %s: %s socket %s must be a clean absolute path", r.Route, p.what, strconv.Quote(trunc(p.path, 120)))
		}
		if len(p.path) > maxPathLen {
			return Refusedf("route %s: %s socket path of %d bytes exceeds the bound of %d", r.Route, p.what, len(p.path), maxPathLen)
		}
	}
	if r.Forward == r.Upstream || r.Forward == r.Reverse || r.Upstream == r.Reverse {
		return Refusedf("route %s: the upstream, forward and reverse sockets must differ", r.Route)
	}
	if err := oracleops.ValidatePrefix(r.Prefix); err != nil {
		return Refusedf("route %s: %v", r.Route, err)
	}
	if err := validAppAccount(r.Route, r.AppAccount); err != nil {
		return err
	}
	if r.Timeouts.ConnectMs < 1 || r.Timeouts.ConnectMs > maxConnectMs {
		return Refusedf("route %s: connect timeout %d ms is outside 1 to %d", r.Route, r.Timeouts.ConnectMs, maxConnectMs)
	}
	if r.Timeouts.ResponseMs < 1 || r.Timeouts.ResponseMs > maxResponseMs {
		return Refusedf("route %s: response timeout %d ms is outside 1 to %d", r.Route, r.Timeouts.ResponseMs, maxResponseMs)
	}
	return nil
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
