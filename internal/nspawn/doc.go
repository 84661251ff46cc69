// Package nspawn boots a real systemd in a systemd-nspawn container for the
// tests that must run against a booted system (package hostjourney): the
// units, sockets, sysusers, sudo and the installer exactly as a production
// host runs them, without touching the machine the tests run on.
//
// # The root file system
//
// Rootfs makes, once per machine, a minimal Debian root of the running suite
// (VERSION_CODENAME of /etc/os-release) with debootstrap --variant=minbase
// and Packages, from the mirror apt already uses (the first deb entry for
// that suite in /etc/apt/sources.list or sources.list.d). It takes 45 to 130
// s and about 250 MB. The finished root is cached in
// CacheDir/rootfs-SUITE-HASH, HASH covering the suite, the package list and
// the harness's version: it is built in a temporary directory beside it
// and renamed into place only when complete (after a sync), so a crash
// leaves no half cache, and a flock serializes two test processes that
// build at once. The cache is the one thing the harness leaves on the
// machine; it is never written once built.
//
// # A booted container
//
// Boot boots that root on an overlay (lower: the cache; upper and work: the
// test's temporary directory), with
//
//	systemd-nspawn -D MERGED -b --register=no --keep-unit --private-network
//	    --link-journal=no --setenv=SYSTEMD_LOG_SECCOMP=1 --notify-ready=yes ...
//
// The overlay is mounted by a small wrapper in a mount namespace of its own
// (unshared before the wrapper runs), so it never appears in the host's
// mount table and goes away with the container even if the test process
// dies. The wrapper first moves itself into a cgroup of the container's
// own (steward-nspawn-NAME in each cgroup hierarchy the harness finds:
// nspawn --keep-unit makes its payload and supervisor cgroups under the
// cgroup it starts in, which would otherwise be the test process's).
//
// Boot blocks until nspawn reports READY=1 on a notify socket (the
// container's systemd reached its default target), reads the container's
// PID 1 from nspawn's X_NSPAWN_LEADER_PID, and then blocks on `systemctl
// is-system-running --wait` inside; the state must be "running". Commands
// run inside with `nsenter --target PID1 --all` and setpriv (--reset-env,
// and, for an account other than root, --reuid/--regid/--init-groups with
// the uid and primary gid the container's /etc/passwd gives it). Reboot asks the container's systemd to reboot, waits for nspawn's
// exit status 133 and boots it again on the same overlay, so the state
// inside is kept.
//
// At the end of the test (t.Cleanup, also when it fails) the container is
// stopped (SIGTERM to nspawn: a clean poweroff; SIGKILL after a bound), its
// cgroups are removed once empty, and what nspawn leaves under the host's
// /run/systemd/nspawn (the machine's propagate directory; the directories
// themselves once no container of this harness runs, which a shared flock
// on CacheDir/.running.lock tells) is removed. If the test process dies
// before its cleanup, nspawn gets SIGKILL (the parent-death signal) and the
// container and its overlay go with it; the next Boot, once no container
// runs, removes the empty cgroups and nspawn's files that were left.
//
// # Skips
//
// Every entry point skips the test with the reason when the machine cannot
// do this (not root, no systemd-nspawn, no overlayfs, and, only when the
// cache must be built, no debootstrap or no reachable mirror), and fails it
// instead when CI=true.
//
// # Kernel log
//
// WatchKernelLog reads /dev/kmsg from the moment it is called: the seccomp
// denials the container's services cause (SYSTEMD_LOG_SECCOMP=1 makes
// systemd set SECCOMP_FILTER_FLAG_LOG on their filters) appear there as
// audit type=1326 lines, even with the kernel's audit subsystem disabled.
package nspawn
