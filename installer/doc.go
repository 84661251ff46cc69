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
//	bundle-install BUNDLE                    operator; not implemented yet
//	controller-tool REQUEST                  operator; not implemented yet
//	controller-tool-result ID                operator; not implemented yet
//	controller-tool-ack ID                   operator; not implemented yet
//	controller-journal [--from SEQ]          operator; not implemented yet
//	controller-enroll REQUEST                operator; not implemented yet
//
// Exit status: 0 done (or, for status, everything in place); 1 refused,
// failed or not implemented yet; 2 unknown verb or malformed arguments.
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
// uninstall removes the sudoers drop-in first, then the units, the
// sysusers.d and tmpfiles.d files and the runtime directories. It keeps
// the state directories and the accounts unless --purge.
//
// # Files read for the operator
//
// ReadPrivateFile is how every operator verb reads a file it is handed: see
// its documentation for the checks, and ToolRequestLimit and
// EnrollRequestLimit for the bounds.
package installer
