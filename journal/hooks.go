package journal

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

	// faultHook, when it returns an error at "write" or "sync", makes that
	// I/O step fail with it, to test that a failure poisons the journal.
	faultHook func(point string) error
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
	return nil
}
