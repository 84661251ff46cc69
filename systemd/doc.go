// Package systemd renders steward's systemd units and gives its daemons the
// three things they need from systemd at run time: readiness and watchdog
// notifications (sd_notify) and socket activation (sd_listen_fds).
//
// # Rendered files
//
// Render returns, keyed by path relative to the installation root:
//
//	etc/systemd/system/steward-operator.service              the host (Type=notify)
//	etc/systemd/system/steward-controller.service            the controller (Type=notify)
//	etc/systemd/system/steward-controller-reverse.socket     /run/steward/controller/reverse.sock
//	etc/systemd/system/steward-controller-foreground.socket  /run/steward/controller/foreground.sock
//	etc/systemd/system/steward-controller-mcp.socket         /run/steward/controller/mcp.sock
//	etc/sysusers.d/steward.conf                              accounts steward-operator, steward-controller, group steward-agents
//	etc/tmpfiles.d/steward.conf                              /run/steward, /run/steward/host, /run/steward/controller
//
// Both services run under their static account (sysusers.d, not
// DynamicUser=) with UMask=0077, a 30 s watchdog, a 0700 StateDirectory= and
// the hardening set of DESIGN.md section 10; the host also has
// PrivateNetwork=yes. systemd-analyze security --offline rates both at 1.0 or
// lower (0.4 host, 0.8 controller with systemd 252). PrivateUsers= is left
// out on purpose: it would hide the peer UIDs the sockets check.
//
// The controller's three fixed sockets come from .socket units, so systemd
// creates each with its owner and mode before the controller runs (the
// foreground socket stays root's alone although the controller accepts on
// it) and the controller writes nothing under /run. The host's route sockets
// depend on the routes selected in its store, so the host binds them itself
// in /run/steward/host. Dirs explains each directory's owner and mode, and
// why they come from tmpfiles.d rather than RuntimeDirectory=.
//
// # Run time
//
// A daemon started by these units does, in order:
//
//	ls, err := systemd.Listeners()                 // controller: reverse, foreground, mcp
//	... open the journal, bind or adopt sockets ...
//	systemd.Ready("STATUS=serving")               // READY=1: the unit counts as started
//	systemd.StartWatchdog(ctx, healthCheck)       // WATCHDOG=1 every 15 s while healthy
//	... serve ...
//	systemd.Stopping()
//
// Outside systemd (tests, steward-dev) Listeners returns an empty map, and
// Ready, Stopping and StartWatchdog do nothing, because NOTIFY_SOCKET and
// WATCHDOG_USEC are unset.
package systemd
