package appliance

import (
	"crypto/sha256"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/oracleops"
)

// Journal identity of the appliance (see doc.go).
const (
	journalOwner  = "steward-appliance"
	journalFormat = "steward-appliance-journal-v1"
	kindAnswer    = "answer"
	// kindBind and kindRebind are the journal's own records: the first
	// record of every log, and a change of its binding (the appliance
	// writes none, but a journal may hold one). Replay passes over them.
	kindBind   = "bind"
	kindRebind = "rebind"
)

// journalConfig is what the journal is bound to. Only what changes the
// meaning of recorded answers belongs here: the prefix does not. It is
// written in canonical JSON (TestJournalConfigIsCanonical), since the
// journal binds the bytes it is given.
var journalConfig = []byte(`{"application":"steward-appliance","protocol":"oracle-operations-v1"}`)

// answerRecord is the body of an "answer" record: one per request id, the
// exact response the appliance sent for it.
type answerRecord struct {
	RequestID  string `cbor:"requestId"`
	BodySHA256 []byte `cbor:"bodySha256"` // of the canonical invocation body
	Status     int    `cbor:"status"`
	Response   []byte `cbor:"response"`
}

// recordKinds is the replay's decoder table: every record kind a journal
// of the appliance may hold, and what replay does with it. A kind not in
// it stops the replay: the journal is the truth and is never
// second-guessed. The tests generate a journal of every kind in this table
// (TestEveryKindIsGenerated), so a kind added here without a generator
// fails them.
var recordKinds = map[string]func(*replayState, journal.Record) error{
	kindBind:   func(*replayState, journal.Record) error { return nil },
	kindRebind: func(*replayState, journal.Record) error { return nil },
	kindAnswer: (*replayState).applyAnswer,
}

var answerDecMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		IndefLength:       cbor.IndefLengthForbidden,
		MaxNestedLevels:   4,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// decodeAnswer decodes an answer record's body strictly: its request id
// is one the appliance could have been sent (1 to 80 bytes of
// A-Za-z0-9_-, the history index's key), its hash 32 bytes.
func decodeAnswer(body []byte) (answerRecord, error) {
	var a answerRecord
	if err := answerDecMode.Unmarshal(body, &a); err != nil {
		return a, err
	}
	if len(a.BodySHA256) != sha256.Size {
		return a, fmt.Errorf("bodySha256 of %d bytes", len(a.BodySHA256))
	}
	if err := oracleops.ValidateRequestID(a.RequestID); err != nil {
		return a, err
	}
	return a, nil
}
