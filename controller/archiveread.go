package controller

import (
	"errors"
	"fmt"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
)

// Reading what `history archive` moved out of the live journal: the
// archives its base names, each opened and verified whole
// (journal.OpenArchive), oldest first, and then the live log, as one
// chain; and which archive holds an attempt asked about.

// journalRecords is a controller journal read from its first record
// through its archives: what `receipts compare` holds the host's export
// against.
type journalRecords struct{ j *journal.Journal }

// Iterate calls fn for every record from seq from (0: the first), in the
// archives the base names and then in the live log.
func (r journalRecords) Iterate(from uint64, fn func(journal.Record) error) error {
	base, based := r.j.Base()
	if !based {
		return r.j.Iterate(from, fn)
	}
	for _, ref := range base.Archives {
		if from > ref.Last {
			continue
		}
		a, err := openArchiveRef(ref)
		if err != nil {
			return err
		}
		if err := a.Iterate(max(from, ref.First), fn); err != nil {
			return err
		}
	}
	return r.j.Iterate(max(from, base.Seq+1), fn)
}

// openArchiveRef opens the archive the journal's base names, checking it
// is that one (its manifest's digest).
func openArchiveRef(ref journal.ArchiveRef) (*journal.Archive, error) {
	a, err := journal.OpenArchive(ref.Dir)
	if err != nil {
		return nil, fmt.Errorf("archive %s, which the journal's base names: %w", ref.Name, err)
	}
	if a.Archived().Manifest != ref.Manifest {
		return nil, fmt.Errorf("archive %s (%s) is not the one the journal's base names: its manifest differs", ref.Name, ref.Dir)
	}
	return a, nil
}

// archivedAttempt is the name of the archive that holds attempt id's
// begin, "" when no archive does (or the journal has none). An archive
// that cannot be read is an error only when no other holds the attempt.
func (c *Controller) archivedAttempt(id string) (string, error) {
	base, based := c.j.Base()
	if !based {
		return "", nil
	}
	var unread error
	for i := len(base.Archives) - 1; i >= 0; i-- {
		ref := base.Archives[i]
		a, err := openArchiveRef(ref)
		if err != nil {
			unread = err
			continue
		}
		found := false
		err = a.Iterate(0, func(r journal.Record) error {
			if r.Kind != ledger.KindBegin {
				return nil
			}
			var b ledger.Begin
			if err := ledger.Decode(r, &b); err != nil {
				return err
			}
			if b.Attempt == id {
				found = true
				return errStop
			}
			return nil
		})
		if found {
			return ref.Name, nil
		}
		if err != nil && !errors.Is(err, errStop) {
			unread = fmt.Errorf("archive %s: %w", ref.Name, err)
		}
	}
	if unread != nil {
		return "", fmt.Errorf("attempt %s: not in the live controller journal, and %w", id, unread)
	}
	return "", nil
}
