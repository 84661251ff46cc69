package history

import "errors"

var (
	// ErrIndexBehind refuses a snapshot whose mark is past what the
	// history index was last synced with (after the index was rebuilt or
	// lost its unsynced part): what ended before the mark may be missing
	// from the index, so an older snapshot or a full replay is used.
	ErrIndexBehind = errors.New("history: the index does not cover the snapshot")
	// ErrReadOnly refuses a snapshot of a read-only keeper.
	ErrReadOnly = errors.New("history: opened read-only, no snapshot is written")
	// ErrClosed refuses a snapshot after Close.
	ErrClosed = errors.New("history: closed")
	// ErrStopped is the keeper's state after its replica refused a record:
	// it makes no more snapshots (Err says which record and why).
	ErrStopped = errors.New("history: snapshots stopped")
	// ErrPastSnapshot refuses an archive up to a mark past the newest
	// snapshot's (Keeper.Archive): the next start would find no snapshot
	// the archive leaves whole.
	ErrPastSnapshot = errors.New("history: the mark is past the newest snapshot's")
)

// stateRefusal is a record the owner's state refused during Open's replay:
// it rejects the snapshot that state came from (the next older one, or a
// full replay, decides), unlike a journal error no snapshot causes.
type stateRefusal struct{ err error }

func (e *stateRefusal) Error() string { return e.err.Error() }
func (e *stateRefusal) Unwrap() error { return e.err }
