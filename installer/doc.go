// Package installer is steward-installer: the only part of steward that runs
// as root. It does a fixed set of verbs, dispatched through one table
// (verbTable); an unknown verb or argument is refused. The operator account
// reaches some of them through sudo, as the sudoers drop-in allows.
//
// # Verbs
//
//	install [--root DIR] [--bin-dir DIR]     root only
//	uninstall [--root DIR] [--purge]         root only
//	status [--root DIR] [--bin-dir DIR] [--json]
//	                                          operator: `status` and `status --json`
//	bundle-install BUNDLE                    operator
//	controller-tool REQUEST                  operator
//	controller-tool-result ID                operator
//	controller-tool-ack ID                   operator
//	controller-journal [--from SEQ]          operator
//	controller-attempts                      operator
//	controller-attempt-inspect ATTEMPT       operator
//	controller-attempt-resolve ATTEMPT       operator
//	controller-config CONFIG                 root only
//	controller-enroll REQUEST                root only
//	controller-pin-host BUNDLE               root only
//
// The payer's side is root's alone: the controller's config (whom it
// admits, what it pays), the journal's rebind to a new config, and the
// host it trusts (the pin) change only through the three root-only verbs,
// which are in no sudo column. No operator verb writes any of them:
// bundle-install writes only the bundle, and only one of the pinned host.
//
// Exit status: 0 done (or, for status, everything in place); 1 failed, or
// a state blocks the verb (the controller running, unresolved attempts,
// no journal yet), or install/uninstall/status refused; 2 unknown verb or
// malformed arguments, or an operator verb's input refused (ExitRefused: a
// file that fails ReadPrivateFile, a malformed request, a bundle that does
// not verify, an enrollment hash that does not match). Every refusal is
// one line on stderr naming the file and the reason.
//
// # What install makes
//
// On the real system (no --root), as root:
//
//   - accounts steward-operator and steward-controller and group
//     steward-agents, by running systemd-sysusers on the installed
//     etc/sysusers.d/steward.conf, exactly as boot does;
//   - the directories of package systemd's Dirs with their owners and modes
//     (the runtime ones are also in etc/tmpfiles.d/steward.conf, for boot);
//   - the units of package systemd's Render in etc/systemd/system, mode 0644;
//   - etc/sudoers.d/steward, mode 0440, checked with `visudo -c` before it
//     is written, letting steward-operator run exactly the sudo column of
//     the verb table as root, and nothing else.
//
// Files are written atomically (temporary file, fsync, rename, fsync of the
// directory), never through a symbolic link. Install examines everything
// first; if something present differs from what it would make it refuses,
// names every difference, and changes nothing. Otherwise it creates only
// what is missing, so running it again changes nothing. It does not start
// or enable the units: the daemons need their keys and config first.
//
// With --root DIR it writes the same files and directories (with their
// modes) under DIR, for packaging and tests; it creates no accounts and
// sets no owners there (they exist only in the sysusers.d file), and
// checks no bin dir (the binaries may be installed later).
//
// The bin dir (--bin-dir, or the directory steward-installer runs from) is
// where the units' ExecStart= and the sudoers rule point. A real install
// refuses one that anyone but root could change: every directory from / to
// it, and steward-installer itself, must be root's and not writable by
// group or others (a root-owned sticky directory such as /tmp aside).
//
// uninstall refuses while a unit is active. It removes the sudoers drop-in
// first, then disables the units (systemctl disable on a booted system;
// on any tree, the .wants/.requires links that point at them), removes the
// units, the sysusers.d and tmpfiles.d files and the runtime directories,
// and has a booted systemd reload so it forgets them. It keeps the state
// directories and the accounts unless --purge.
//
// # Files read for the operator
//
// ReadPrivateFile is how every operator verb reads a file it is handed: see
// its documentation for the checks, and ToolRequestLimit and
// EnrollRequestLimit for the bounds (a bundle: ctlconf.MaxBundleBytes).
//
// # The controller's files
//
// Where the controller lives is fixed (Env.Controller, DefaultControllerEnv:
// the config /var/lib/steward-controller/config.json, and, while none is
// installed, the bundle /var/lib/steward-controller/host.bundle, the journal
// /var/lib/steward-controller/journal and the foreground socket
// /run/steward/controller/foreground.sock); nothing on the command line or
// in the environment can point the installer elsewhere. The installed
// config names the bundle, state dir and sockets once it exists. It is read
// without following a link in its last component and must be root's or the
// controller's. Before bundle-install, controller-journal,
// controller-config, controller-enroll and controller-pin-host touch the
// controller's files, the installer becomes the steward-controller account
// for good (setgroups, setresgid, setresuid): what it writes is the
// controller's, and no path in the controller's config can make root read
// or write elsewhere. So do the verbs that speak on the foreground socket
// (the tool and attempt verbs): they become the controller's account
// before they read its config or dial, and they dial only the installed
// path (ControllerEnv.Foreground), never a path the config names: a
// config naming another foreground socket is refused (exit 1), nothing
// dialled. The socket must be that account's (wire.DialOwned: bound by
// the controller, or made for it by systemd; no directory above it
// writable by another account).
//
// status must read root's files (the sudoers drop-in, the directories'
// owners) and the controller's, so it cannot drop for good: it reads the
// controller's config and bundle, and stats the forward sockets the bundle
// names, on one OS thread of its own whose credentials alone become the
// controller's (asControllerThread), a thread that is never reused. A
// config naming a file only root may read gets status "permission denied",
// not its contents or its existence.
//
// # controller-pin-host BUNDLE (root only)
//
// A bundle carries the host key it is verified with, so whoever installs
// one chooses whom the controller trusts. The pin makes that root's
// choice: controller-pin-host reads BUNDLE as a private file of root (or
// SUDO_UID when root ran it through sudo; the operator's bundle is copied
// first, e.g. `install -m 0600 /var/lib/steward-operator/host.bundle
// /root/host.bundle`), verifies it, refuses one built for another
// controller than the installed config names, becomes the controller's
// account and writes StateDir/host-pin.json (HostPinFile), mode 0600:
// {"hostKeySha256": the SHA-256 of the bundle's host key bytes, "hostUid":
// the bundle's host uid}. Run again with another host's bundle it replaces
// the pin (rotation) and prints what it replaced; it installs no bundle.
// An explicit root verb rather than "the first bundle-install pins": a
// first install through sudo would let the operator choose the key.
//
// # controller-config CONFIG (root only)
//
// Installs the controller's config. It is in no sudo column: the config
// says whom the controller admits and as which agent (and, with the
// payer's policy, what it pays), which the operator account must not be
// able to change: adding an agent is this verb, then controller-enroll,
// then a controller restart. CONFIG is read as a private file of root (or
// SUDO_UID when root ran it through sudo), parsed strictly (ctlconf.Parse,
// which resolves the named agents' accounts and groups and refuses a uid
// two entries match), and must name the installed
// state directory and the installed socket paths; then, as the
// controller's account, its key directory must hold the four role keys
// and its bundle must be installed and match its services
// (ctlconf.LoadBundle), before the file replaces the installed config
// atomically, mode 0600. It prints one JSON line (ConfigResult); when the
// controller's journal is bound to another config, "next" names the
// controller-enroll request that must rebind it before the controller
// starts.
//
// # controller-attempts, controller-attempt-inspect ATTEMPT, controller-attempt-resolve ATTEMPT
//
// The operator's way to the controller's `attempts list|inspect|resolve`
// without being root: ops attempts, inspect and resolve on the foreground
// socket. Each prints one JSON line {"id", "state", "result"}; result is
// the controller's JSON (the uncertain attempts, or the inspection). The
// foreground socket is socket-activated, so a stopped controller starts to
// answer. Resolve asks the host and journals its answer; nothing is sent
// again.
//
// # bundle-install BUNDLE
//
// Reads BUNDLE (at most 1 MiB), verifies it with msg.OpenBundle (the
// bundle's hybrid signature and every route record in it), refuses a
// bundle built for another controller than the installed config names,
// becomes the controller's account, requires the pin (controller-pin-host;
// none is exit 1) and refuses, exit 2, a bundle whose host key or host uid
// differs from it, in one line naming what differs; then installs it as the controller's bundle, mode 0600: a temporary file
// beside it, written, fsync'd, renamed over it, the directory fsync'd. The
// same bytes already in place are left alone ("unchanged"). The controller
// reads the bundle when it next starts.
//
// # controller-tool REQUEST, controller-tool-result ID, controller-tool-ack ID
//
// REQUEST (at most 256 KiB) is JSON {"tool": NAME, "arguments": {...}}:
// no other field, no duplicate key, arguments an object (absent: {}). It is
// submitted on the foreground socket (foreground.Call, op
// submit); the controller journals it, runs it and answers. Each verb
// prints one JSON line {"id", "state", "result", "error"}: state is done,
// running or interrupted, result is the tool's result as the controller
// produced it. The result stays with the controller until acknowledged
// (controller-tool-ack), so an operator who lost the output asks again
// with controller-tool-result. IDs are 1 to 80 of A-Za-z0-9_-. A request
// the controller refuses is exit 2, with its reason.
//
// The operator account spends nothing of the payer's unless root's config
// grants it payer.foregroundAllowance {maxPerCall, perDay}: without one,
// an oracle_call is refused, exit 2, in one line naming the installed
// config and how root grants one, before the socket is dialled (the
// controller refuses it too, before it journals anything, should a
// running controller's config differ). oracle_discover is sent either way.
//
// # controller-journal [--from SEQ]
//
// Prints the controller's journal from SEQ (1 when absent or 0) as JSON
// lines, one per record: {"seq", "prev", "kind", "at", "body"}. prev is
// the hex SHA-256 of the previous record's payload; at is unix ms; body is
// the record's CBOR body rendered as JSON: a byte string becomes a string
// of lowercase hex (hashes, receipts, and the exact bytes a record keeps,
// such as a rebind's before and after configs), text, booleans, null,
// arrays and integers stay as they are (exactly, to 64 bits; bignums as
// numbers), maps become objects (text keys only), a time tag becomes an
// RFC 3339 string, any other tag {"tag": N, "value": ...}. The journal is
// opened read-only: the controller may be running; the records printed are
// those durable when the verb started. A SEQ past the end prints nothing.
//
// # controller-enroll REQUEST (root only)
//
// Root's alone, like controller-config: the rebind is what lets the
// controller run with a new config. REQUEST is read as a private file of
// root (or SUDO_UID when root ran it through sudo). REQUEST (at most
// 8 KiB) is exactly
//
//	{"protocol": "steward-controller-enrollment-v1", "mode": "application",
//	 "expectedBindingSha256": HEX, "targetConfigSha256": HEX}
//
// with 64 lowercase hex digits each, different from each other, no other
// field and no duplicate key. It rebinds the controller's journal from the
// config it ran with to the config installed now (DESIGN.md section 9):
//
//  1. targetConfigSha256 must be the canonical SHA-256 (canonjson.Sum256)
//     of the installed config, else refused naming it;
//  2. the journal must exist and hold records (the controller binds its
//     first config at its first start);
//  3. a repeat: if the journal is already bound to the target and its last
//     rebind record went from expectedBindingSha256, the verb prints that
//     rebind's result with "changed": false and writes nothing (this needs
//     no lock, so it answers while the controller runs); bound to the
//     target otherwise, it is refused naming expectedBindingSha256;
//  4. otherwise it opens the journal read-write, which takes its lock: a
//     running controller holds it, and the verb fails ("the controller is
//     running");
//  5. under the lock, the journal's binding must equal
//     expectedBindingSha256, else refused naming it;
//  6. no attempt may be uncertain (ledger.Uncertain), else it
//     fails listing them and the verbs that resolve them;
//  7. it appends the rebind record (journal.Rebind), which retains the
//     config before and after, and prints
//     {"protocol", "bindingBefore", "bindingAfter", "seq", "changed": true}.
//
// A crash after the rebind is durable but before the output leaves the
// rebind in place; running the same request again prints it, unchanged.
package installer
