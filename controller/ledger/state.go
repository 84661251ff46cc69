package ledger

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// This file is the ledger as a snapshot holds it (DESIGN.md section 13):
// what a replay of the journal up to a mark rebuilds, encoded
// deterministically, so that a ledger replayed to a mark and one decoded
// from that mark's snapshot encode alike. What only a running controller
// holds (attempts it began, consents it signed, foreground requests
// running) is never in a snapshot: the keeper encodes its replica, which
// is only ever replayed, and Encode refuses a ledger that holds any.

// StateFormat and StateVersion name the snapshot format of the ledger
// (journal/snapshot's Format and Version). The snapshots are unsigned:
// the controller holds no authority a snapshot would have to prove (its
// journal is its own account's, as the snapshot files are, and every
// charge and answer in it is the host's signed receipt).
const (
	StateFormat  = "steward-controller-state"
	StateVersion = 1
)

// The bounds of a decoded state. MaxStateItems bounds each of its lists
// (open attempts, requestIds in memory, foreground requests) and the
// principals of the day's spending: a replayed ledger with an index holds
// what is under way (attempts not ended, foreground requests not
// acknowledged), tens or hundreds, and Encode refuses a ledger past it
// (the snapshot is not made, and the keeper says why) rather than write
// one Decode would refuse. MaxStateNesting bounds the CBOR nesting (the
// state's map, a list, an entry, its begin: 4).
const (
	MaxStateItems   = 1 << 16
	MaxStateNesting = 8
)

// stateEnc is the deterministic encoding of a state (RFC 8949 core
// deterministic, as package wire's), without wire's bound of 4096 entries
// a list: a state's lists are bounded by MaxStateItems.
var stateEnc = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic("ledger: state encoding options: " + err.Error())
	}
	return m
}()

var stateDec = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		IndefLength:       cbor.IndefLengthForbidden,
		UTF8:              cbor.UTF8RejectInvalid,
		MaxNestedLevels:   MaxStateNesting,
		MaxArrayElements:  MaxStateItems,
		MaxMapPairs:       MaxStateItems,
	}.DecMode()
	if err != nil {
		panic("ledger: state decoding options: " + err.Error())
	}
	return m
}()

// stateV1 is the ledger's encoding, version 1. Lists are sorted (open
// attempts by begin seq and id, requestIds by their index key, foreground
// requests by id), so that one ledger has one encoding.
type stateV1 struct {
	Open     []openV1          `cbor:"open"`
	Requests []requestV1       `cbor:"requests"`
	Fg       []fgV1            `cbor:"fg"`
	Day      int64             `cbor:"day"`
	Spent    map[string]uint64 `cbor:"spent"`
}

// openV1 is an attempt that has not ended.
type openV1 struct {
	Begin    Begin     `cbor:"begin"`
	BeginSeq uint64    `cbor:"beginSeq"`
	State    msg.State `cbor:"state"`
	Detail   string    `cbor:"detail"`
	Ask      string    `cbor:"ask"`
	Recorded bool      `cbor:"recorded"`
	Amount   uint64    `cbor:"amount"`
	// Consented: its result (uncertain) says a consent was given for it
	// (Result.Consented): inspect's not-seen does not abandon it.
	Consented bool `cbor:"consented,omitempty"`
}

// requestV1 is a requestId in memory: the latest attempt of an agent's
// application requestId while it is open (and, without a history index,
// after it ended: EndSeq not 0).
type requestV1 struct {
	Agent       string         `cbor:"agent"`
	Application string         `cbor:"application"`
	RequestID   string         `cbor:"requestId"`
	Attempt     string         `cbor:"attempt"`
	SHA256      []byte         `cbor:"sha256"`
	Path        string         `cbor:"path"`
	Route       string         `cbor:"route"`
	Unscoped    bool           `cbor:"unscoped"`
	State       msg.State      `cbor:"state"`
	Ask         string         `cbor:"ask"`
	ByOperator  bool           `cbor:"byOperator"`
	Answer      *journal.Place `cbor:"answer"`
	EndSeq      uint64         `cbor:"endSeq"`
}

// fgV1 is a foreground request not yet acknowledged.
type fgV1 struct {
	ID      string `cbor:"id"`
	Tool    string `cbor:"tool"`
	Attempt string `cbor:"attempt"`
	Result  []byte `cbor:"result"`
}

// Encode is the ledger as a snapshot holds it (history.State): its open
// attempts, the requestIds in memory, the foreground requests, the latest
// day and what each principal spent on it. It refuses a ledger holding
// what this process began (see the file's comment) or more than
// MaxStateItems of anything.
func (l *Ledger) Encode() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for what, n := range map[string]int{"open attempts": len(l.open), "requestIds": len(l.byReq), "foreground requests": len(l.fg), "principals": len(l.spent)} {
		if n > MaxStateItems {
			return nil, fmt.Errorf("ledger: %d %s, more than a snapshot holds (%d)", n, what, MaxStateItems)
		}
	}
	s := stateV1{Open: make([]openV1, 0, len(l.open)), Requests: make([]requestV1, 0, len(l.byReq)), Fg: make([]fgV1, 0, len(l.fg)),
		Day: l.day, Spent: l.spent}
	for id, e := range l.open {
		if e.live {
			return nil, fmt.Errorf("ledger: attempt %s was begun by this process; a snapshot holds only a replayed ledger", id)
		}
		s.Open = append(s.Open, openV1{Begin: e.begin, BeginSeq: e.beginSeq, State: e.state, Detail: e.detail,
			Ask: e.ask, Recorded: e.recorded, Amount: e.amount, Consented: e.consented})
	}
	slices.SortFunc(s.Open, func(a, b openV1) int {
		return cmp.Or(cmp.Compare(a.BeginSeq, b.BeginSeq), cmp.Compare(a.Begin.Attempt, b.Begin.Attempt))
	})
	for k, q := range l.byReq {
		r := requestV1{Agent: k.agent, Application: k.application, RequestID: k.requestID, Attempt: q.attempt, SHA256: bytes.Clone(q.sha[:]),
			Path: q.path, Route: q.route, Unscoped: q.unscoped, State: q.state, Ask: q.ask, ByOperator: q.byOperator, EndSeq: q.endSeq}
		if q.answer != (journal.Place{}) {
			a := q.answer
			r.Answer = &a
		}
		s.Requests = append(s.Requests, r)
	}
	slices.SortFunc(s.Requests, func(a, b requestV1) int {
		return bytes.Compare(RequestKey(a.Agent, a.Application, a.RequestID), RequestKey(b.Agent, b.Application, b.RequestID))
	})
	for id, f := range l.fg {
		select {
		case <-f.done:
		default:
			return nil, fmt.Errorf("ledger: foreground request %s is running in this process; a snapshot holds only a replayed ledger", id)
		}
		s.Fg = append(s.Fg, fgV1{ID: id, Tool: f.tool, Attempt: f.attempt, Result: f.result})
	}
	slices.SortFunc(s.Fg, func(a, b fgV1) int { return cmp.Compare(a.ID, b.ID) })
	b, err := stateEnc.Marshal(s)
	if err == nil {
		// What Decode would refuse is not written.
		err = stateDec.Wellformed(b)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding the state: %w", err)
	}
	return b, nil
}

// DecodeState is the ledger a snapshot of version holds, with idx its
// history index (nil for none), decoded strictly: no unknown or duplicate
// field, the bounds above, and a state a replay can give (each attempt
// and requestId once, open attempts uncertain or awaiting approval, a
// requestId in memory naming its open attempt, or, only without an index,
// one that ended). A refusal names what is wrong in one line.
func DecodeState(version uint64, b []byte, idx Index) (*Ledger, error) {
	if version != StateVersion {
		return nil, fmt.Errorf("ledger: a state of version %d; this controller reads version %d", version, StateVersion)
	}
	var s stateV1
	if err := stateDec.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("ledger: state: %w", err)
	}
	l := New()
	l.idx = idx
	if err := l.restore(&s); err != nil {
		return nil, fmt.Errorf("ledger: state: %w", err)
	}
	return l, nil
}

// restore fills a new ledger from s, checking it as DecodeState says.
func (l *Ledger) restore(s *stateV1) error {
	l.day = s.Day
	for p, n := range s.Spent {
		if p == "" {
			return fmt.Errorf("spending of an empty principal (%d)", n)
		}
		l.spent[p] = n
	}
	for _, o := range s.Open {
		id := o.Begin.Attempt
		switch {
		case id == "":
			return fmt.Errorf("an open attempt without an id (begin seq %d)", o.BeginSeq)
		case l.open[id] != nil:
			return fmt.Errorf("attempt %s is open twice", id)
		case o.State != msg.StateUncertain && o.State != msg.StateAwaitingApproval:
			return fmt.Errorf("attempt %s is open in state %q, which no replay leaves", id, o.State)
		case o.BeginSeq == 0:
			return fmt.Errorf("attempt %s has no begin record", id)
		}
		l.open[id] = &entry{begin: o.Begin, beginSeq: o.BeginSeq, state: o.State, detail: o.Detail, ask: o.Ask, recorded: o.Recorded, amount: o.Amount, consented: o.Consented}
	}
	for _, r := range s.Requests {
		if err := l.restoreRequest(&r); err != nil {
			return err
		}
	}
	for _, f := range s.Fg {
		if f.ID == "" || l.fg[f.ID] != nil {
			return fmt.Errorf("foreground request %q is empty or twice", f.ID)
		}
		l.fg[f.ID] = &fgEntry{tool: f.Tool, attempt: f.Attempt, result: f.Result, done: closedChan()}
	}
	return nil
}

// restoreRequest adds one requestId of a decoded state.
func (l *Ledger) restoreRequest(r *requestV1) error {
	k := reqKey{r.Agent, r.Application, r.RequestID}
	switch {
	case r.RequestID == "":
		return fmt.Errorf("a requestId entry of attempt %s without a requestId", r.Attempt)
	case l.byReq[k] != nil:
		return fmt.Errorf("requestId %q of agent %q and application %q is there twice", r.RequestID, r.Agent, r.Application)
	case len(r.SHA256) != 32:
		return fmt.Errorf("requestId %q: a request hash of %d bytes, not 32", r.RequestID, len(r.SHA256))
	case r.EndSeq != 0 && l.idx != nil:
		return fmt.Errorf("requestId %q ended at record %d, but with a history index an ended requestId is in the index, not in a snapshot", r.RequestID, r.EndSeq)
	case r.EndSeq == 0:
		e := l.open[r.Attempt]
		if e == nil || keyOf(&e.begin) != k || e.state != r.State {
			return fmt.Errorf("requestId %q names attempt %s, which is not open with it in state %q", r.RequestID, r.Attempt, r.State)
		}
	}
	q := &reqEntry{attempt: r.Attempt, path: r.Path, route: r.Route, unscoped: r.Unscoped, state: r.State, ask: r.Ask,
		byOperator: r.ByOperator, endSeq: r.EndSeq}
	copy(q.sha[:], r.SHA256)
	if r.Answer != nil {
		if r.Answer.Seq == 0 {
			return fmt.Errorf("requestId %q: an answer at record 0", r.RequestID)
		}
		q.answer = *r.Answer
		// A refused entry with an answer is a denial, as in the index.
		q.denied = r.State == msg.StateRefused
	}
	l.byReq[k] = q
	return nil
}
