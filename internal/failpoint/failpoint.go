// Package failpoint kills the process at a named point, so that crash-safety
// tests can crash a real binary exactly where they mean to.
//
// A test sets STEWARD_FAILPOINT=NAME in a child's environment; when the child
// reaches Hit(NAME) it sends itself SIGKILL. Nothing is flushed, nothing is
// deferred: the journal must show what a real crash at that point would leave.
// With the variable unset, Hit is one string comparison.
package failpoint

import (
	"os"
	"syscall"
)

// Env is the environment variable that names the armed failpoint.
const Env = "STEWARD_FAILPOINT"

// JournalFdatasync is the failpoint, read by package journal itself (which
// imports nothing of steward's), that makes every batch fdatasync of the
// process's journals fail with EIO, so that a daemon's test can watch its
// journal stop for good (journal.ErrFailed) and the daemon exit non-zero.
// It kills nothing.
const JournalFdatasync = "journal-fdatasync"

var armed = os.Getenv(Env)

// Hit kills the process with SIGKILL if name is the armed failpoint.
func Hit(name string) {
	if armed == "" || armed != name {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not deliverable late; never return past the point.
}

// Armed reports the name of the armed failpoint, or "".
func Armed() string { return armed }

// Hold blocks the calling goroutine for good if name is the armed
// failpoint, leaving the rest of the process running: a test sees what
// the process has already done (an answer sent) and kills it there, before
// what the held goroutine would have done next (its record journaled).
func Hold(name string) {
	if armed == "" || armed != name {
		return
	}
	select {}
}
