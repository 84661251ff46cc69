package operator

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Approvals (DESIGN.md section 5, "Approvals"). A call by an agent whose
// current limits record marks the operation (msg.ApprovalPolicy.Marks) is
// admitted as usual, holds nothing, and becomes an ask: an `ask` record in
// the host journal, appended before the dispatch is answered. A human
// (AnswerAsk) or a bounded advisor agent (Advise) decides it with an
// `ask-answer` record, the first answer winning; an unanswered ask that is
// read after its expiry gets an `ask-expired` record with the policy's
// on-timeout verdict. The controller collects the verdict on the same
// attempt (ask_dispatch.go). Everything here is rebuilt from those three
// records (ask_records.go), so a restart changes nothing about an ask and
// refills no advisor's bound.

// ask is one ask as the host keeps it: the call it stands for, as the ask
// record holds it, and its resolution.
type ask struct {
	ID           string
	Seq          uint64 // its ask record's
	Attempt      string
	Controller   string
	Route        string // the route the call came on, whose reverse channel a verdict is pushed on
	Agent        string
	Conversation string
	// ConversationName is the agent's own name of Conversation (which is
	// scoped per agent), as its dispatch named it: what views show.
	ConversationName string
	Application      string
	Operation        string
	Kind             string
	RequestSHA       []byte
	Method, Path     string
	Body             []byte // the canonical invoke body (the arguments are in it)
	Arguments        []byte // the canonical JSON of the arguments, read from body
	Price            uint64
	// Justification is the agent's own short reason (at most
	// msg.MaxJustification bytes, one line).
	Justification string
	RaisedAt      int64 // unix ms, the store's clock
	ExpiresAt     int64
	Park          time.Duration
	OnTimeout     msg.Verdict
	// LimitsRevision is the revision of the agent's limits record that
	// marked the call (receipts verify reads the marking against it).
	LimitsRevision uint64
	// CallDay is the UTC day whose calls the ask counted one of (its
	// record's day; 0 for an ask recorded before asks counted calls).
	CallDay int64
	// AgentUID is the asking session's account ("uid:N"; "" when the
	// controller did not say): no human answer from it is taken.
	AgentUID string

	State      msg.AskState
	Verdict    msg.Verdict // approve or deny once decided (an expiry: onTimeout)
	AnsweredBy string      // "uid:N", "agent:NAME" or "expiry"
	Account    string      // the human's account name beside uid:N
	Advisor    string      // the advisor's agent name, when an advisor answered
	Note       string      // the human's note or the advisor's sentence
	AnsweredAt int64
	// CollectBy is the end of an approval's collect window (unix ms, the
	// store's clock), 0 when it has none (ask_window.go).
	CollectBy int64
	// answering is set, under Store.mu, while an answer's or an expiry's
	// record is being appended: the compare-and-swap on the durable record.
	// A reader sees the ask still pending until the record is applied.
	answering bool
}

// convKey names one conversation of one agent of one controller: what an
// advisor bound counts by.
type convKey struct{ Controller, Agent, Conversation string }

// askState is the part of state that holds the asks. Store.mu guards it,
// as the rest of state; Store.askMu serializes the appends of ask records
// with their apply (see Store.askMu).
type askState struct {
	// mu (Store.mu) guards the fields that follow.
	Asks         map[string]*ask // by id
	AskOrder     []string        // ids in the order raised
	askByAttempt map[string]*ask
	asksPending  map[string]*ask // the asks still pending (not answered or expired)
	// AdvisorAnswers counts the approve and deny answers advisors gave,
	// per asking agent's conversation: from ask-answer records only, so a
	// restart refills nothing.
	AdvisorAnswers map[convKey]uint64
	// AskEvents is every ask event (raised, answered, expired) in journal
	// order, which `approvals watch` follows by journal sequence number.
	AskEvents []views.AskEvent
	// askSignal is closed, and replaced, when an event is added: AskEvents
	// waits on it.
	askSignal chan struct{}
}

func newAskState() askState {
	return askState{
		Asks: map[string]*ask{}, askByAttempt: map[string]*ask{}, asksPending: map[string]*ask{},
		AdvisorAnswers: map[convKey]uint64{}, askSignal: make(chan struct{}),
	}
}

// addAsk records a newly raised ask and its event (journal seq).
func (st *state) addAsk(a *ask, seq uint64) {
	a.Seq = seq
	st.Asks[a.ID] = a
	st.AskOrder = append(st.AskOrder, a.ID)
	st.askByAttempt[a.Attempt] = a
	st.asksPending[a.ID] = a
	st.addAskEvent(seq, views.AskRaised, a.RaisedAt, a)
}

// decideAsk applies an answer or an expiry to a pending ask.
func (st *state) decideAsk(a *ask, seq uint64, state msg.AskState, v msg.Verdict, by, account, advisor, note string, at int64) {
	a.State, a.Verdict, a.AnsweredBy, a.Account, a.Advisor, a.Note, a.AnsweredAt = state, v, by, account, advisor, note, at
	a.answering = false
	delete(st.asksPending, a.ID)
	event := views.AskAnswered
	if state == msg.AskExpired {
		event = views.AskExpiredEvent
	}
	if advisor != "" {
		st.AdvisorAnswers[convKey{a.Controller, a.Agent, a.Conversation}]++
		st.advisorDayCount(a, at)
	}
	st.addAskEvent(seq, event, at, a)
}

// addAskEvent appends an event with the ask's view as of it and wakes
// the waiting AskEvents calls.
func (st *state) addAskEvent(seq uint64, event string, at int64, a *ask) {
	v := a.view()
	v.Arguments = nil // an event holds no body: AskEvents reads it from the ask
	st.AskEvents = append(st.AskEvents, views.AskEvent{Seq: seq, Event: event, At: at, Ask: v})
	close(st.askSignal)
	st.askSignal = make(chan struct{})
}

// view is the ask as the host shows it, as it is recorded (lazy expiry
// is applied before a view is read: expireDue).
func (a *ask) view() msg.AskView {
	return msg.AskView{
		ID: a.ID, Attempt: a.Attempt, Controller: a.Controller, Agent: a.Agent, Conversation: a.Conversation, ConversationName: a.ConversationName,
		Application: a.Application, Operation: a.Operation, RequestSHA256: hex.EncodeToString(a.RequestSHA),
		Arguments: a.Arguments, Price: a.Price, Justification: a.Justification, RaisedAt: a.RaisedAt,
		ExpiresAt: a.ExpiresAt, OnTimeout: a.OnTimeout, State: a.State, AnsweredBy: a.AnsweredBy,
		AnsweredAt: a.AnsweredAt, Note: a.Note, CollectBy: a.CollectBy,
	}
}

// ticket is what a dispatch or a collect answers for a pending ask at
// now (unix ms): park until the window ends or the ask expires.
func (a *ask) ticket(now int64) *msg.AskTicket {
	return &msg.AskTicket{ID: a.ID, ParkUntil: min(now+a.Park.Milliseconds(), a.ExpiresAt), ExpiresAt: a.ExpiresAt, OnTimeout: a.OnTimeout}
}

// due reports whether a pending ask has expired at now (unix ms) and no
// answer is being appended.
func (a *ask) due(now int64) bool {
	return a.State == msg.AskPending && !a.answering && now >= a.ExpiresAt
}

// askIDBytes is how many random bytes an ask id carries: 12 hex digits,
// short enough to type in `approvals respond`.
const askIDBytes = 6

// newAskID makes an ask id not yet in st: "ask-" and 12 lowercase hex
// digits of randomness. Called with Store.mu held.
func (st *state) newAskID() string {
	for {
		var b [askIDBytes]byte
		rand.Read(b[:]) // never fails (crypto/rand)
		id := "ask-" + hex.EncodeToString(b[:])
		if _, taken := st.Asks[id]; !taken {
			return id
		}
	}
}

// raise journals ask k (its id made here) and applies it: the ask pending,
// its attempt awaiting approval. The record is durable before anything
// answers or waits on the ask. On an error (a bound's: *raiseRefused)
// nothing is applied.
func (s *Store) raise(k *ask) error {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if err := s.raiseChecked(k); err != nil {
		return err
	}
	seq, err := s.append(hostlog.KindAsk, k.record())
	if err != nil {
		s.mu.Lock()
		s.st.askUncall(k)
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	at := s.st.Attempts[k.Attempt]
	if at == nil {
		at = askAttempt(k)
		s.st.Attempts[k.Attempt] = at
	}
	at.State, at.Ask = msg.StateAwaitingApproval, k.ID
	if at.First == 0 {
		at.First = seq.Seq
	}
	s.st.addAsk(k, seq.Seq)
	v := k.view()
	s.mu.Unlock()
	s.logAsk("raised", v, "price", v.Price, "expiresAt", time.UnixMilli(v.ExpiresAt).UTC().Format(time.RFC3339))
	return nil
}
