package controller

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Attempt states, as the controller knows them.
const (
	// StatePending: begun by this process, the dispatch is in flight.
	StatePending = "pending"
	// StateUncertain: sending may have happened and no answer is recorded —
	// either the dispatch outcome was uncertain, or the controller found a
	// begin without a result at start (pending inspection). Refused for a
	// new call with the same requestId until resolved.
	StateUncertain = "uncertain"
	StateDefinite  = "definite"
	StateRefused   = "refused"
	StateNotSent   = "not-sent"
	StateAbandoned = ResolvedAbandoned
	StateReleased  = ResolvedReleased
)

// Attempt is one attempt as the journal shows it.
type Attempt struct {
	ID          string `json:"id"`
	Tool        string `json:"tool"`
	Application string `json:"application"`
	Operation   string `json:"operation,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
	Route       string `json:"route"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	Detail      string `json:"detail,omitempty"`
	BeginSeq    uint64 `json:"beginSeq"`
}

// attemptEntry is an attempt that has not ended: pending or uncertain.
type attemptEntry struct {
	begin     beginRecord
	beginSeq  uint64
	state     string
	detail    string
	live      bool   // begun by this process: the only attempts ever consented to
	consented bool   // a consent was signed for it
	settled   []byte // receipt hash of a settle that arrived before the result
	check     *receiptCheck
}

// receiptCheck is one signature check of a signed receipt, shared by the
// settle and the dispatch result of an attempt, which carry the same bytes:
// whichever arrives first verifies, the other waits for its answer instead
// of verifying the same bytes against the same key again.
type receiptCheck struct {
	sum  [32]byte // SHA-256 of the signed bytes
	done chan struct{}
	rc   msg.Receipt // read after done
	err  error       // read after done
}

func (e *attemptEntry) public() Attempt {
	return Attempt{
		ID: e.begin.Attempt, Tool: e.begin.Tool, Application: e.begin.Application,
		Operation: e.begin.Operation, RequestID: e.begin.RequestID, Route: e.begin.Route,
		Kind: e.begin.Kind, State: e.state, Detail: e.detail, BeginSeq: e.beginSeq,
	}
}

type reqKey struct{ application, requestID string }

// reqEntry is the latest attempt for one application requestId.
type reqEntry struct {
	attempt   string
	sha       [32]byte
	state     string
	answerSeq uint64 // the record (result or resolve) holding the definite answer
}

// fgEntry is a foreground request not yet acknowledged.
type fgEntry struct {
	tool    string
	attempt string
	result  []byte // ToolResult JSON, nil while running
	done    chan struct{}
}

// recentSettles bounds how many receipt hashes of ended attempts are kept
// to check a settle that arrives after the result.
const recentSettles = 4096

// ledger is the in-memory index of the journal: open attempts, the
// requestId index and foreground requests. Rebuilt at start by iterating
// the journal.
type ledger struct {
	mu     sync.Mutex
	open   map[string]*attemptEntry
	byReq  map[reqKey]*reqEntry
	fg     map[string]*fgEntry
	recent map[string][]byte // attempt -> receipt hash, for late settles
	ring   []string
	next   int
}

func newLedger() *ledger {
	return &ledger{
		open:   map[string]*attemptEntry{},
		byReq:  map[reqKey]*reqEntry{},
		fg:     map[string]*fgEntry{},
		recent: map[string][]byte{},
		ring:   make([]string, recentSettles),
	}
}

func decodeBody(r journal.Record, v any) error {
	if err := wire.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("journal record %d (%s): %w", r.Seq, r.Kind, err)
	}
	return nil
}

// rebuild replays the journal into l. Every begin without a result is
// uncertain: whether it was consented to or sent cannot be known.
func (l *ledger) rebuild(j *journal.Journal) error {
	return j.Iterate(1, func(r journal.Record) error {
		switch r.Kind {
		case kindBegin:
			var b beginRecord
			if err := decodeBody(r, &b); err != nil {
				return err
			}
			l.applyBegin(b, r.Seq, false)
		case kindResult:
			var res resultRecord
			if err := decodeBody(r, &res); err != nil {
				return err
			}
			l.applyResult(res, r.Seq)
		case kindResolve:
			var res resolveRecord
			if err := decodeBody(r, &res); err != nil {
				return err
			}
			l.applyResolve(res, r.Seq)
		case kindFgSubmit:
			var s fgSubmitRecord
			if err := decodeBody(r, &s); err != nil {
				return err
			}
			d := make(chan struct{})
			close(d)
			l.fg[s.ID] = &fgEntry{tool: s.Tool, done: d}
		case kindFgResult:
			var s fgResultRecord
			if err := decodeBody(r, &s); err != nil {
				return err
			}
			if e := l.fg[s.ID]; e != nil {
				e.result = s.Result
			}
		case kindFgAck:
			var s fgAckRecord
			if err := decodeBody(r, &s); err != nil {
				return err
			}
			delete(l.fg, s.ID)
		}
		return nil
	})
}

// applyBegin records a begin; live says it was begun by this process.
func (l *ledger) applyBegin(b beginRecord, seq uint64, live bool) {
	e := &attemptEntry{begin: b, beginSeq: seq, state: StatePending, live: live}
	if !live {
		e.state = StateUncertain
		e.detail = "begin journaled, no result: pending inspection"
	}
	l.open[b.Attempt] = e
	if b.RequestID != "" {
		var sha [32]byte
		copy(sha[:], b.RequestSHA256)
		l.byReq[reqKey{b.Application, b.RequestID}] = &reqEntry{attempt: b.Attempt, sha: sha, state: e.state}
	}
	if b.Foreground != "" {
		if f := l.fg[b.Foreground]; f != nil {
			f.attempt = b.Attempt
		}
	}
}

func outcomeState(outcome string) string {
	switch outcome {
	case msg.OutcomeDefinite:
		return StateDefinite
	case msg.OutcomeRefused:
		return StateRefused
	case msg.OutcomeNotSent:
		return StateNotSent
	default:
		return StateUncertain
	}
}

func (l *ledger) applyResult(r resultRecord, seq uint64) {
	l.end(r.Attempt, outcomeState(r.Outcome), r.Detail, seq, r.Receipt)
}

func (l *ledger) applyResolve(r resolveRecord, seq uint64) {
	l.end(r.Attempt, r.State, "resolved by "+r.By, seq, r.Receipt)
}

// end moves an attempt to state; an uncertain one stays open.
func (l *ledger) end(id, state, detail string, seq uint64, receipt []byte) {
	e := l.open[id]
	if e == nil {
		return
	}
	if state == StateUncertain {
		e.state, e.detail = state, detail
	} else {
		delete(l.open, id)
	}
	if e.begin.RequestID != "" {
		if q := l.byReq[reqKey{e.begin.Application, e.begin.RequestID}]; q != nil && q.attempt == id {
			q.state = state
			if state == StateDefinite {
				q.answerSeq = seq
			}
		}
	}
	if receipt != nil {
		l.remember(id, msg.ReceiptHash(receipt))
	}
}

func (l *ledger) remember(id string, h []byte) {
	if old := l.ring[l.next]; old != "" {
		delete(l.recent, old)
	}
	l.ring[l.next] = id
	l.next = (l.next + 1) % len(l.ring)
	l.recent[id] = h
}

// verifiedReceipt verifies signed against the pinned host key once per
// open attempt: a second caller with the same bytes gets the first one's
// answer. Bytes that differ (a host settling one receipt and answering
// another) are verified on their own.
func (c *Controller) verifiedReceipt(attempt string, signed []byte) (msg.Receipt, error) {
	sum := sha256.Sum256(signed)
	l := c.led
	l.mu.Lock()
	e := l.open[attempt]
	if e != nil && e.check != nil && e.check.sum == sum {
		ck := e.check
		l.mu.Unlock()
		<-ck.done
		return ck.rc, ck.err
	}
	ck := &receiptCheck{sum: sum, done: make(chan struct{})}
	if e != nil && e.check == nil {
		e.check = ck
	}
	l.mu.Unlock()
	ck.rc, ck.err = msg.VerifyReceipt(signed, c.bind.HostRing)
	close(ck.done)
	return ck.rc, ck.err
}

// uncertain lists the open attempts that are not in flight, by begin seq.
func (l *ledger) uncertain() []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Attempt
	for _, e := range l.open {
		if e.state == StateUncertain {
			out = append(out, e.public())
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].BeginSeq < out[k].BeginSeq })
	return out
}

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
