// Package hostjourney is steward's production walkthrough on a real host:
// a booted systemd (package internal/nspawn boots a minimal Debian in a
// systemd-nspawn container), with root and the real accounts inside it
// running each command as an operator types it, from a fresh system to a
// governed call and back out. It has no API; `go test ./hostjourney/` runs
// testdata/*.txtar with github.com/rogpeppe/go-internal/testscript.
//
// The journey (testdata/host.txtar), in order: steward-installer install
// (twice: the second changes nothing) → the controller's keys, as the
// controller's account → the operator's store, purse, grant, route and
// bundle, as the operator's account → bundle-install through sudo as the
// operator → the controller's first config through the root-only
// controller-config verb, refused through the operator's sudo → the units
// enabled and started, and their systemd-analyze security exposure, live
// and --offline → the reference appliance as an account of its own under a
// transient unit (systemd-run) → an agent account's paid call through
// `steward-controller mcp` on /run/steward/controller/mcp.sock: definite,
// replayed with the same requestId, a conflict refused, an account not on
// the allow-list refused → the host's attempts listed as the operator, none
// uncertain → a route revision naming another account as the application's
// (replacing the selected one), the next call not sent with one line and no
// path, then a third revision with the application's account selected again
// → the kill switch (a frozen purse refuses a call, a thawed one answers it)
// → an agent added to the controller's config: controller-config with the
// controller stopped, a start refused until controller-enroll rebinds the
// journal (repeated, it changes nothing), then the new agent's call answered
// → socket activation (the controller stopped, an
// agent's connection starts it) → the watchdog (a WatchdogSec=2s drop-in
// and a SIGSTOPped controller: killed, restarted, its state intact) →
// every operator verb through sudo as the operator, and the root-only
// verbs refused there → an uncertain attempt (a unit drop-in arming
// STEWARD_FAILPOINT on steward-operator.service), inspected and resolved
// through the operator's verbs → the units restarted and the container
// rebooted: state kept, calls replay, the receipts verified and compared →
// approvals: an agent's marked operations raise asks, which an approver
// answers from its own account on the approvals socket and an advisor on
// advisor.sock until its bound, past which a human denies; the host's log
// and approvals watch → uninstall, refused while steward runs, then
// disabling and removing, then --purge.
//
// docs/OPERATING.md is this journey as an operator reads it:
// TestOperatingDocIsTheJourney holds its commands to the script's, and
// TestOperatingDocShowsTheJourneysFiles its files to the script's files.
//
// Commands a script may use beyond testscript's own:
//
//	ct [-u USER] [-stdin FILE] CMD ARGS...   CMD inside the container as USER (root
//	                                         when absent), the script's FILE on stdin
//	capture VAR [REGEXP]                     VAR from the last stdout: its one line,
//	                                         or REGEXP's one group
//	waitsock PATH                            bounded wait for a socket inside that accepts
//	waitexit PID                             bounded wait for a process inside to exit
//	reboot                                   a full reboot of the container; stdout is
//	                                         the state it reached
//	exposure NAME                            the last stdout's systemd-analyze
//	                                         exposure, kept for the report
//
// TestHostJourney builds steward's commands (CGO_ENABLED=0) and places them
// root-owned 0755 in the container's /usr/local/bin, the installer's bin
// dir. It reads the kernel log over the whole journey and fails on every
// seccomp denial (audit type=1326) of a steward process (systemd's
// SYSTEMD_LOG_SECCOMP=1 in the container's PID 1 makes the services'
// filters log), logging those of other processes; and it logs the wall
// time of each part (the root file system built or cached, the build, each
// boot, the script) and the exposure scores.
//
// It needs root, systemd-nspawn, overlayfs and, for the first run on a
// machine, debootstrap and the Debian mirror apt uses; it skips without
// them, and fails instead under CI=true.
package hostjourney
