package controller

import (
	"crypto/sha256"
	"errors"

	"github.com/stewardrt/steward/controller/ledger"
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

func sha(b []byte) [32]byte { return sha256.Sum256(b) }
