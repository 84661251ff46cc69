package appliance

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
)

// errClientGone is claim's error when the client left while its call
// waited for another with the same request id: there is no one to answer.
var errClientGone = errors.New("client gone while waiting for the same requestId")

// answer is a recorded response: the record's seq, the canonical body's
// hash, the status and the exact body.
type answer struct {
	seq      uint64
	bodySHA  [32]byte
	status   int
	response []byte
}

// pending marks a request id being looked up in the index or, once
// claimed, whose invocation is running; a second call with the same id
// waits for it instead of running twice.
type pending struct {
	bodySHA [32]byte
	done    chan struct{}
	claimed bool // guarded by ledger.mu: the lookup found nothing, it runs
}

// ledger decides invocations by request id. An answer recorded since the
// last snapshot is in recent; one before it is in the history index,
// whose entry names the record, read at once (journal.ReadAt). recent is
// bounded by the snapshot interval: the keeper's callback forgets what
// the index holds durably.
type ledger struct {
	j      *journal.Journal
	x      *index.Index
	faults *faults
	// base is the answers the start found; added those recorded since.
	base  uint64
	added atomic.Uint64

	mu      sync.Mutex
	recent  map[string]*answer
	running map[string]*pending
}

// faults is where an index failure is reported (by the ledger and by the
// replay states alike), once: the server stops on it, so that a restart
// reopens the index, or rebuilds it when it is damaged (set aside first).
type faults struct {
	once sync.Once
	ch   chan struct{}
	err  error // set before ch is closed
}

func newFaults() *faults { return &faults{ch: make(chan struct{})} }

func (f *faults) report(err error) {
	f.once.Do(func() {
		f.err = err
		close(f.ch)
	})
}

func newLedger(j *journal.Journal, x *index.Index, f *faults, base uint64) *ledger {
	return &ledger{j: j, x: x, faults: f, base: base, recent: map[string]*answer{}, running: map[string]*pending{}}
}

// claim decides what to do with an invocation: replay a recorded answer
// (rec != nil, conflict false), refuse a conflict (conflict true), or run
// it (p != nil: the caller must call release(p) when done). A call with
// the same id and body as a running one waits for it and then decides
// again (another body is a conflict at once), and so does any call with
// an id being looked up in the index, so that an id is never looked up
// and run at once. An *archivedAnswer is the same body's id whose answer
// is archived: refused, nothing runs. Any other error but errClientGone is
// a fault reading the recorded answer: nothing may run for the id.
func (l *ledger) claim(done <-chan struct{}, id string, sum [32]byte) (rec *answer, conflict bool, p *pending, err error) {
	for {
		l.mu.Lock()
		if a := l.recent[id]; a != nil {
			l.mu.Unlock()
			return a, a.bodySHA != sum, nil, nil
		}
		if other := l.running[id]; other != nil {
			l.mu.Unlock()
			if other.claimed && other.bodySHA != sum {
				return nil, true, nil, nil
			}
			select {
			case <-other.done:
				continue
			case <-done:
				return nil, false, nil, errClientGone
			}
		}
		p := &pending{bodySHA: sum, done: make(chan struct{})}
		l.running[id] = p
		l.mu.Unlock()
		// Held as running, the id cannot be recorded meanwhile: what the
		// index says of it now is what it will say.
		a, err := l.recorded(id)
		if err != nil || a != nil {
			l.release(id, p)
			var aa *archivedAnswer
			if errors.As(err, &aa) && aa.sum != sum {
				return nil, true, nil, nil // another body: a conflict, as before the archive
			}
			if err != nil {
				return nil, false, nil, err
			}
			return a, a.bodySHA != sum, nil, nil
		}
		l.mu.Lock()
		p.claimed = true
		l.mu.Unlock()
		return nil, false, p, nil
	}
}

// recorded is the answer the index holds for id, read from the journal at
// the place its entry names, nil when there is none. The record must be
// the answer to id with the entry's hash: an index that says otherwise is
// damaged, and a fault.
func (l *ledger) recorded(id string) (*answer, error) {
	v, ok, err := l.x.Get(answersBucket, []byte(id))
	if err != nil {
		return nil, l.fault(err)
	}
	if !ok {
		return nil, nil
	}
	damaged := func(format string, args ...any) error {
		return l.fault(&index.DamagedError{Path: l.x.Path(), Reason: fmt.Sprintf("requestId %q: ", id) + fmt.Sprintf(format, args...)})
	}
	e, err := decodeEntry(v)
	if err != nil {
		return nil, damaged("%v", err)
	}
	r, err := l.j.ReadAt(e.place)
	var ae *journal.ArchivedError
	switch {
	case errors.As(err, &ae):
		return nil, &archivedAnswer{id: id, archive: ae.Archive, sum: e.sum}
	case errors.Is(err, journal.ErrBadPlace):
		return nil, damaged("its place is none of the journal's: %v", err)
	case err != nil:
		return nil, fmt.Errorf("reading the answer to requestId %q: %w", id, err)
	case r.Kind != kindAnswer:
		return nil, damaged("record %d is a %q record, not an answer", r.Seq, r.Kind)
	}
	a, err := decodeAnswer(r.Body)
	switch {
	case err != nil:
		return nil, fmt.Errorf("journal %s: record %d: %w", l.j.Dir(), r.Seq, err)
	case a.RequestID != id:
		return nil, damaged("its place is record %d, the answer to requestId %q", r.Seq, a.RequestID)
	case !bytes.Equal(a.BodySHA256, e.sum[:]):
		return nil, damaged("record %d answers it with another body hash than the entry's", r.Seq)
	}
	return &answer{seq: r.Seq, bodySHA: e.sum, status: a.Status, response: a.Response}, nil
}

// archivedAnswer is claim's error for a request id whose answer
// `history archive` moved out of the live journal: the id is taken (its
// index entry holds it, with its body's hash) and its answer cannot be
// replayed, so it is refused and never run again. It names the archive
// by its name only, never a path of the appliance's host.
type archivedAnswer struct {
	id, archive string
	sum         [32]byte
}

func (e *archivedAnswer) Error() string {
	return "request " + strconv.Quote(e.id) + " is archived in " + e.archive
}

// Unwrap makes errors.Is(err, journal.ErrArchived) true.
func (e *archivedAnswer) Unwrap() error { return journal.ErrArchived }

// fault reports an index failure and returns it.
func (l *ledger) fault(err error) error {
	l.faults.report(err)
	return err
}

// record journals an answer (returning after fdatasync) and keeps it in
// recent until a snapshot's index holds it.
func (l *ledger) record(id string, sum [32]byte, status int, response []byte) error {
	p, err := l.j.AppendAt(kindAnswer, answerRecord{RequestID: id, BodySHA256: sum[:], Status: status, Response: response})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.recent[id] = &answer{seq: p.Seq, bodySHA: sum, status: status, response: response}
	l.mu.Unlock()
	l.added.Add(1)
	return nil
}

// release ends a claim; waiters look again.
func (l *ledger) release(id string, p *pending) {
	l.mu.Lock()
	delete(l.running, id)
	l.mu.Unlock()
	close(p.done)
}

// forget drops from recent the answers up to mark m, which the index holds
// durably now (the keeper's callback after a snapshot at m).
func (l *ledger) forget(m journal.Mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, a := range l.recent {
		if a.seq <= m.Seq {
			delete(l.recent, id)
		}
	}
}

// count is the number of recorded answers.
func (l *ledger) count() uint64 { return l.base + l.added.Load() }

// held is the number of answers kept in memory.
func (l *ledger) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent)
}
