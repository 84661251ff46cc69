package ledger

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/snapshot"
)

// SnapshotDir is the directory of the controller's snapshots: "snapshots"
// beside its journal directory (both in its state directory).
func SnapshotDir(journalDir string) string {
	return filepath.Join(filepath.Dir(journalDir), "snapshots")
}

// ReadOnly is a controller journal opened read-only from its newest
// usable snapshot (OpenReadOnly).
type ReadOnly struct {
	Journal *journal.Journal
	Ledger  *Ledger
	// Snapshot is the snapshot file the ledger started from ("" after a
	// full replay) and From its mark; Rejected the newer ones refused,
	// each with why.
	Snapshot string
	From     journal.Mark
	Rejected []snapshot.Rejected
}

// errRefusedState marks a snapshot whose state, or a record after it
// that state refused: the next older snapshot is tried.
type errRefusedState struct{ err error }

func (e *errRefusedState) Error() string { return e.err.Error() }
func (e *errRefusedState) Unwrap() error { return e.err }

// OpenReadOnly opens the controller journal in dir read-only (a live one
// up to what is durable) and rebuilds its ledger, without a history
// index (Discard: the requestIds that ended are not kept), from the
// newest snapshot in SnapshotDir(dir) that decodes and
// whose mark the journal accepts, then the records after it; a full
// replay when none is usable. It writes nothing but the removal of a
// temporary an interrupted snapshot write left (journal/snapshot.Load).
//
// It is journal/history's read-only open, which the root installer cannot
// link (history reaches the index's database, bbolt, which the
// installer's import rule keeps out): the controller's own read-only
// commands use history.Open, and a test holds the two to the same
// ledger.
func OpenReadOnly(dir string) (ReadOnly, error) {
	var ro ReadOnly
	var fatal error
	accept := func(s snapshot.Snapshot) error {
		if fatal != nil {
			return fatal
		}
		l, err := DecodeState(s.Version, s.State, Discard())
		if err != nil {
			return err
		}
		j, err := openApplying(dir, &s.Mark, l)
		var refused *errRefusedState
		switch {
		case err == nil:
		case errors.Is(err, journal.ErrMarkMismatch), errors.As(err, &refused):
			return err
		default:
			fatal = err
			return err
		}
		ro.Journal, ro.Ledger = j, l
		return nil
	}
	loaded, err := snapshot.Load(SnapshotDir(dir), StateFormat, nil, accept)
	ro.Rejected = loaded.Rejected
	switch {
	case fatal != nil:
		return ro, fatal
	case err == nil:
		ro.Snapshot, ro.From = loaded.Name, loaded.Mark
		return ro, nil
	case !errors.Is(err, snapshot.ErrNoSnapshot):
		return ro, err
	}
	l := NewIndexed(Discard())
	j, err := openApplying(dir, nil, l)
	if err != nil {
		return ro, err
	}
	ro.Journal, ro.Ledger = j, l
	return ro, nil
}

// openApplying opens the journal in dir read-only from mark (nil: from
// its first record, through the archives of a journal that has some, as
// the keeper's full replay does), applying every record after it to l
// during the journal's verifying scan.
func openApplying(dir string, mark *journal.Mark, l *Ledger) (*journal.Journal, error) {
	apply := func(r journal.Record) error {
		if err := l.Apply(r); err != nil {
			return &errRefusedState{fmt.Errorf("record %d (%s): %w", r.Seq, r.Kind, err)}
		}
		return nil
	}
	return journal.Open(dir, journal.Options{ReadOnly: true, From: mark, OnRecord: apply, ReplayArchives: mark == nil})
}
