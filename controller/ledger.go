package controller

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
)

// The controller journal's records and the index rebuilt from them are
// package ledger's (the one interpreter of that record language); these
// names are the same things, for the controller's own code.
const (
	JournalOwner  = ledger.JournalOwner
	JournalFormat = ledger.JournalFormat
)

// Attempt is one attempt as the journal shows it (package ledger).
type Attempt = ledger.Attempt

// errStop ends an Iterate early.
var errStop = errors.New("stop")

// readRecord returns the record at seq.
func readRecord(j *journal.Journal, seq uint64) (journal.Record, error) {
	var out journal.Record
	found := false
	err := j.Iterate(seq, func(r journal.Record) error {
		out, found = r, true
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return out, err
	}
	if !found || out.Seq != seq {
		return out, fmt.Errorf("journal record %d not found", seq)
	}
	return out, nil
}

func sha(b []byte) [32]byte { return sha256.Sum256(b) }
