// Package host is the host daemon, `steward-operator serve`: it opens the
// operator's store (package operator) as its Daemon and serves it on
// every socket the store's records name, until it is told to stop.
//
//	err := host.Serve(ctx, storeDir, host.ServeOptions{Ready: notifyReady})
//
// # What it owns and what it may touch
//
// The sockets and everything on them: the listeners of the routes'
// forward sockets (routes.go) and of the controllers' control sockets
// (controls.go), the admin socket (admin.go) and the approvals socket
// (approvals.go), each admitting by SO_PEERCRED before its handshake
// (channels.go); the frame handlers that turn a frame into a store call
// (channels.go, control.go); the reverse channels, on which it asks the
// payer's consent and pushes a verdict (payer.go); the application's
// socket, to which it delivers (deliver.go); and its timers, the
// checkpointer and the expiry of asks (timers.go). It decides nothing of
// custody: admission, reservations, receipts and asks are the store's,
// reached only through the store's methods, and it never reads the
// store's state or takes its locks. Its own locks (the listener sets',
// the reverse channels', the work count's) are each taken alone, or
// before the store's, never under them.
//
// # Control socket
//
// Each controller's record names its control socket (controller add
// --control; controller control for one added before it, or to move it),
// and the host listens on it at start, bound as a forward socket is;
// through the running host both commands take effect at once: the socket
// is listened on before the record is appended (operator.Listeners), a
// moved socket's old listener closed once the new one serves. It answers
// routes (the RouteIDs of the selected revisions of that controller's
// routes, with the signed records the controller does not already know),
// inspect and allowance, and the advisors' asks and advise; a controller
// with no route still has it, so the routes registered later are found
// there. bundle build puts the path in the bundle and refuses a
// controller without one.
//
// # Admin socket
//
// While `serve` runs it holds the journal lock, and administrative
// commands (fund, freeze, thaw, grant issue/revoke, controller
// add/control, route register/activate/deactivate/remove, agent set,
// attempts, approvals) reach it over STORE/admin.sock in the admin
// language (package operator/admin): a wire listener (mode 0600 in the
// 0700 store) that admits only the daemon's own UID, speaking signed
// frames (the operator key's Ed25519 half on both sides). The same store
// methods run as on a store a command opens itself (admin.Do). Who asks is
// the connection's SO_PEERCRED uid ("uid:N"), never what the request
// says: a route change's, a resolution's and an answer's. A redelivery is
// the host's own work (it delivers to the application): with no host it
// is refused.
//
// # Under systemd
//
// `serve` sends READY=1 once the journal is open and every socket is bound,
// then feeds the unit's watchdog (WATCHDOG_USEC) while the host journal is
// sound. After a failed fdatasync the journal stops for good (what is on
// disk is unknown), and so does it when a receipt's record is not written
// (receipts are journal.AppendLinked records: receipt N+1 is signed on top
// of N, so none may land after a lost one): `serve` shuts down and exits 1
// with one line saying so, so that systemd restarts the host and it
// reopens the journal from what is on disk, where the attempt whose
// receipt was lost is a reservation without an outcome (uncertain, its
// charge held once). Any other failed write is undone by the journal and
// the host goes on. SIGINT or SIGTERM sends STOPPING=1 and shuts down
// cleanly. ServeOptions takes these hooks with package systemd's
// signatures; the command line passes systemd's.
package host
