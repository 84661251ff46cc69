package installer

import (
	"errors"
	"fmt"
	"os"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/systemd"
	"github.com/stewardrt/steward/wire/msg"
	"golang.org/x/sys/unix"
)

// statusRoutes is routeFindings on a real system as the controller's
// account (asControllerThread): the files it reads are the controller's,
// and the paths in them are the controller's config's and the operator's
// bundle's to choose. Under --root, root chose the tree and reads it as
// itself.
func statusRoutes(t tree, env ControllerEnv, db *accountDB) ([]finding, error) {
	if !t.real {
		return routeFindings(t, env, db), nil
	}
	if db != nil && env.Account != "" {
		if _, ok := db.uid(env.Account); !ok {
			// The accounts finding says it is missing; without it there is
			// no account to read the controller's files as.
			return []finding{{Kind: "route", Name: env.Config, State: stateUnknown,
				Detail: "not examined: no account " + env.Account + " to read the controller's files as"}}, nil
		}
	}
	var out []finding
	err := env.asControllerThread(func() { out = routeFindings(t, env, db) })
	return out, err
}

// routeFindings lists the routes the installed bundle selects for the
// controller, and whether the host serves each one now: its forward socket
// exists. It does not connect: the host would refuse root as a wrong peer
// and log it. Under --root the config and bundle are looked for at their
// default places in the tree.
func routeFindings(t tree, env ControllerEnv, db *accountDB) []finding {
	cfgPath, bundlePath := env.Config, env.Bundle
	if !t.real {
		cfgPath, bundlePath = t.abs(rel(systemd.DefaultControllerConfig)), t.abs(rel(systemd.DefaultControllerBundle))
	}
	var owners []uint32
	if db != nil {
		if uid, ok := db.uid(env.Account); ok {
			owners = append(owners, uid)
		}
	}
	ic, err := readInstalledConfig(cfgPath, owners...)
	switch {
	case err == nil:
		bundlePath = ic.cfg.Bundle
		if !t.real {
			bundlePath = t.abs(rel(bundlePath))
		}
	case !errors.Is(err, errNoConfig):
		return []finding{{Kind: "route", Name: cfgPath, State: stateDiffers, Detail: err.Error()}}
	}
	raw, err := readOwnedFile(bundlePath, ctlconf.MaxBundleBytes, owners...)
	if errors.Is(err, os.ErrNotExist) {
		return []finding{{Kind: "route", Name: bundlePath, State: stateUnknown, Detail: "no bundle installed: no route is selected"}}
	}
	if err != nil {
		return []finding{{Kind: "route", Name: bundlePath, State: stateDiffers, Detail: err.Error()}}
	}
	b, _, routes, err := msg.OpenBundle(raw)
	if err != nil {
		return []finding{{Kind: "route", Name: bundlePath, State: stateDiffers, Detail: "the installed bundle does not verify: " + err.Error()}}
	}
	if len(routes) == 0 {
		return []finding{{Kind: "route", Name: bundlePath, State: stateUnknown, Detail: fmt.Sprintf("the bundle for controller %s selects no route", b.Controller)}}
	}
	var out []finding
	for _, r := range routes {
		f := finding{Kind: "route", Name: r.Route,
			Detail: fmt.Sprintf("selected: application %s, revision %d, forward %s", r.Application, r.Revision, r.Forward)}
		fwd := r.Forward
		if !t.real {
			fwd = t.abs(rel(fwd))
		}
		var st unix.Stat_t
		if err := unix.Lstat(fwd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			f.State, f.Detail = stateOK, f.Detail+"; running (the host's socket is there)"
		} else {
			f.State, f.Detail = stateDown, f.Detail+"; not running (no socket: the host does not serve it now)"
		}
		out = append(out, f)
	}
	return out
}
