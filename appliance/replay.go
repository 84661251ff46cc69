package appliance

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/journal"
)

// Journal identity of the appliance (see doc.go).
const (
	journalOwner  = "steward-appliance"
	journalFormat = "steward-appliance-journal-v1"
	kindAnswer    = "answer"
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

// answer is a recorded response, kept in memory by request id.
type answer struct {
	bodySHA  [32]byte
	status   int
	response []byte
}

// pending marks a request id whose invocation is running; a second call
// with the same id waits for it instead of running twice.
type pending struct {
	bodySHA [32]byte
	done    chan struct{}
}

// ledger is the request-id index over the journal.
type ledger struct {
	j       *journal.Journal
	mu      sync.Mutex
	answers map[string]*answer
	running map[string]*pending
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

// openLedger rebuilds the index from every answer record in j. Two
// answers for one request id, or a record kind it does not know, stop it:
// the journal is the truth and is never second-guessed.
func openLedger(j *journal.Journal) (*ledger, error) {
	l := &ledger{j: j, answers: map[string]*answer{}, running: map[string]*pending{}}
	err := j.Iterate(1, func(r journal.Record) error {
		switch r.Kind {
		case "bind", "rebind":
			return nil
		case kindAnswer:
		default:
			return fmt.Errorf("journal %s: record %d has unknown kind %q", j.Dir(), r.Seq, r.Kind)
		}
		var a answerRecord
		if err := answerDecMode.Unmarshal(r.Body, &a); err != nil {
			return fmt.Errorf("journal %s: record %d: %w", j.Dir(), r.Seq, err)
		}
		if len(a.BodySHA256) != sha256.Size {
			return fmt.Errorf("journal %s: record %d: bodySha256 of %d bytes", j.Dir(), r.Seq, len(a.BodySHA256))
		}
		if _, dup := l.answers[a.RequestID]; dup {
			return fmt.Errorf("journal %s: record %d: a second answer for requestId %q", j.Dir(), r.Seq, a.RequestID)
		}
		l.answers[a.RequestID] = &answer{bodySHA: [32]byte(a.BodySHA256), status: a.Status, response: a.Response}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// claim decides what to do with an invocation: replay a recorded answer
// (rec != nil, conflict false), refuse a conflict (conflict true), or run
// it (p != nil: the caller must call release(p) when done). A call with
// the same id and body as a running one waits for it and then decides
// again.
func (l *ledger) claim(done <-chan struct{}, id string, sum [32]byte) (rec *answer, conflict bool, p *pending, err error) {
	for {
		l.mu.Lock()
		if a := l.answers[id]; a != nil {
			l.mu.Unlock()
			return a, a.bodySHA != sum, nil, nil
		}
		if other := l.running[id]; other != nil {
			l.mu.Unlock()
			if other.bodySHA != sum {
				return nil, true, nil, nil
			}
			select {
			case <-other.done:
				continue
			case <-done:
				return nil, false, nil, fmt.Errorf("client gone while waiting for the same requestId")
			}
		}
		p := &pending{bodySHA: sum, done: make(chan struct{})}
		l.running[id] = p
		l.mu.Unlock()
		return nil, false, p, nil
	}
}

// record journals an answer (returning after fdatasync) and indexes it.
func (l *ledger) record(id string, sum [32]byte, status int, response []byte) error {
	if _, err := l.j.Append(kindAnswer, answerRecord{RequestID: id, BodySHA256: sum[:], Status: status, Response: response}); err != nil {
		return err
	}
	l.mu.Lock()
	l.answers[id] = &answer{bodySHA: sum, status: status, response: response}
	l.mu.Unlock()
	return nil
}

// release ends a claim; waiters look again.
func (l *ledger) release(id string, p *pending) {
	l.mu.Lock()
	delete(l.running, id)
	l.mu.Unlock()
	close(p.done)
}

// count is the number of recorded answers.
func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}
