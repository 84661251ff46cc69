package installer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// routeFindings reports the controller's streamable HTTP and advisor
// sockets when its config names them (ownSocketFinding), the host's control socket for the controller
// (the bundle's Bundle.Control), where the controller asks for its live
// routes, and the routes the bundle carried when it was built, each with
// whether the host serves its socket now: the socket exists. The live
// route table is the host's (`steward-operator route list`); this does
// not connect: the host would refuse root as a wrong peer and log it. A
// bundle with no control socket is one the controller refuses. Under
// --root the config and bundle are looked for at their default places in
// the tree.
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
	var out []finding
	switch {
	case err == nil:
		bundlePath = ic.cfg.Bundle
		if !t.real {
			bundlePath = t.abs(rel(bundlePath))
		}
		for _, o := range ownSockets {
			if p := o.path(ic.cfg.Sockets); p != "" {
				out = append(out, ownSocketFinding(t, db, o, p))
			}
		}
	case !errors.Is(err, errNoConfig):
		return []finding{{Kind: "route", Name: cfgPath, State: stateDiffers, Detail: err.Error()}}
	}
	return append(out, bundleFindings(t, bundlePath, owners)...)
}

// ownSocketMode is the mode the controller binds the sockets it binds
// itself with (controller/mcphttp.go, controller/advisor.go): 0666, since
// their directory's group is the host's, not the agents' (DESIGN.md
// section 2), so the file mode cannot be the gate; SO_PEERCRED and the
// config's agents are.
const ownSocketMode = 0o666

// ownSocketFinding reports a socket the controller binds itself that the
// config names (ownSockets: sockets.mcpHTTP, sockets.advisor). No socket
// unit makes it, and the installed unit lets the controller write under
// /run only in its runtime directory (ReadWritePaths=, ProtectSystem=strict),
// which agents may traverse (2751); its state directory is 0700: a path
// anywhere else is a socket the controller cannot bind or agents cannot
// reach (ownSocket.beside, the rule controller-config refuses by). Inside
// it, the socket is served when it is there (this does not connect: the
// controller would refuse root as no configured agent), owned by the
// controller with the host's group (the directory's setgid bit), mode
// 0666.
func ownSocketFinding(t tree, db *accountDB, o ownSocket, path string) finding {
	if !o.beside(path, filepath.Dir(systemd.MCPSocketPath)) {
		return finding{Kind: "socket", Name: t.abs(rel(path)), State: stateDiffers,
			Detail: fmt.Sprintf("%s is outside the controller's runtime directory %s: the installed unit lets the controller bind a socket under /run only there (ProtectSystem=strict, ReadWritePaths=), and its state directory is 0700, out of the agents' reach; name %s",
				o.field, systemd.ControllerRuntimeDir, filepath.Join(systemd.ControllerRuntimeDir, o.name))}
	}
	f := socketFinding(t, db, path, systemd.ControllerUser, systemd.OperatorUser, ownSocketMode)
	what := fmt.Sprintf("%s (%s): ", o.what, o.field)
	switch f.State {
	case stateOK:
		f.Detail = what + "served (the controller's socket is there), " + f.Detail
	case stateAbsent:
		f.Detail = what + "not served (no socket: the controller is not running)"
	default:
		f.Detail = what + f.Detail
	}
	return f
}

// bundleFindings reports the installed bundle's control socket and the
// routes it carried (routeFindings).
func bundleFindings(t tree, bundlePath string, owners []uint32) []finding {
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
	if b.Control == "" {
		return []finding{{Kind: "control", Name: bundlePath, State: stateDiffers,
			Detail: fmt.Sprintf("the bundle for controller %s names no control socket (built before the host had one), so the controller refuses it: rebuild it with `steward-operator bundle build %s` and install it", b.Controller, b.Controller)}}
	}
	out := []finding{servedSocket(t, finding{Kind: "control", Name: b.Control,
		Detail: "the host's control socket for controller " + b.Controller + ": its live routes are the controller's applications"}, b.Control)}
	if len(routes) == 0 {
		return append(out, finding{Kind: "route", Name: bundlePath, State: stateUnknown,
			Detail: fmt.Sprintf("the bundle for controller %s carried no route when it was built: the host's active routes are asked live on its control socket", b.Controller)})
	}
	for _, r := range routes {
		out = append(out, servedSocket(t, finding{Kind: "route", Name: r.Route,
			Detail: fmt.Sprintf("in the bundle as built: application %s, revision %d, forward %s", r.Application, r.Revision, r.Forward)}, r.Forward))
	}
	return out
}

// servedSocket completes f with whether the host serves the socket at path
// now: it exists, as a socket.
func servedSocket(t tree, f finding, path string) finding {
	if !t.real {
		path = t.abs(rel(path))
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		f.State, f.Detail = stateOK, f.Detail+"; running (the host's socket is there)"
	} else {
		f.State, f.Detail = stateDown, f.Detail+"; not running (no socket: the host does not serve it now)"
	}
	return f
}
