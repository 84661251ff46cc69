package journal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Test hooks. They are nil outside tests; the crash tests set crashHook in a
// re-executed child to SIGKILL itself at a named point, so that the parent
// sees exactly what a crash there leaves on disk. Package journal imports
// nothing of steward's, so it cannot use internal/failpoint.
var (
	// crashHook is called at "segment-created" (a new segment is durable,
	// before any record is written to it), "after-write" (the batch is
	// written, before fdatasync), "after-sync" (after fdatasync, before any
	// append is acknowledged) and "queued" (an append has joined a batch and
	// is about to wait).
	crashHook func(point string)

	// faultHook, when it returns an error at a point, makes that I/O step
	// fail with it: "write" (the batch's pwritev, before any byte is
	// written), "sync" (the batch's fdatasync), "fallocate" (every
	// preallocation; EOPNOTSUPP there stands for a file system without
	// fallocate, which tmpfs is not), "segment-sync" (the fsync of a new
	// segment under its temporary name), "undo" (removing what a failed
	// write wrote) and "undo-sync" (its fdatasync).
	faultHook func(point string) error

	// shortWriteHook, when set, is asked before each batch write of want
	// bytes; when it returns an error, only the first n bytes are written
	// (for real) and the write fails with it, as a write cut short at byte
	// n by a full disk does.
	shortWriteHook func(want int) (n int, err error)

	// readOnlyHook is called by a read-only Open at "scan" (it found no
	// owner running and is about to scan the log in full) and at
	// "probed-again" (the scan is done and it probed the lock again,
	// finding an owner when running is true), so that a test can start an
	// owner exactly while a reader reads.
	readOnlyHook func(point string, running bool)

	// lockRetryHook is called by an owner's Open each time it finds the
	// lock held only shared (a reader's probe) and is about to try again.
	lockRetryHook func(try int)

	// watermarkOff, when set, makes the owner skip every rewrite of the
	// watermark, so that a benchmark can measure what the rewrite costs.
	watermarkOff bool
)

func crashPoint(point string) {
	if crashHook != nil {
		crashHook(point)
	}
}

func faultPoint(point string) error {
	if faultHook != nil {
		return faultHook(point)
	}
	if point == "sync" && syncFailpointArmed {
		return errFailpointSync
	}
	return nil
}

// The daemons' own tests run them as child processes and need their
// journal to fail there, where no test can set faultHook: the environment
// variable of package internal/failpoint (which journal cannot import),
// STEWARD_FAILPOINT=journal-fdatasync, makes every batch fdatasync fail
// with EIO, as a disk that lost a write does. It is read once at start,
// as failpoint reads it; unset, it costs one boolean test.
const (
	failpointEnv          = "STEWARD_FAILPOINT"
	failpointFdatasync    = "journal-fdatasync"
	failpointFdatasyncErr = "injected by " + failpointEnv + "=" + failpointFdatasync
)

var (
	syncFailpointArmed = os.Getenv(failpointEnv) == failpointFdatasync
	errFailpointSync   = fmt.Errorf("%w (%s)", unix.EIO, failpointFdatasyncErr)
)
