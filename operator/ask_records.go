package operator

import (
	"bytes"
	"fmt"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// askOf builds the ask an ask record raises, checking what replay and a
// raise both rely on: the request hashes to its hash, the arguments read
// from it, the verdict is one.
func askOf(b *hostlog.Ask) (*ask, error) {
	req := oracleops.Request{Method: b.Method, Path: b.Path, Body: b.Body}
	if sum := req.SHA256(); !bytes.Equal(sum[:], b.RequestSHA256) {
		return nil, fmt.Errorf("ask %s: the request does not hash to its request hash", b.Ask)
	}
	ib, err := oracleops.ParseInvokeBody(b.Body)
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", b.Ask, err)
	}
	if b.OnTimeout != msg.VerdictApprove && b.OnTimeout != msg.VerdictDeny {
		return nil, fmt.Errorf("ask %s: on-timeout verdict %q is neither approve nor deny", b.Ask, b.OnTimeout)
	}
	if b.AgentUID != "" {
		if err := hostlog.ValidUID("ask "+b.Ask+": the agent's account", b.AgentUID); err != nil {
			return nil, err
		}
	}
	return &ask{
		ID: b.Ask, Attempt: b.Attempt, Controller: b.Controller, Route: b.Route, Agent: b.Agent,
		Conversation: b.Conversation, Application: b.Application, Operation: b.Operation, Kind: b.Kind,
		RequestSHA: b.RequestSHA256, Method: b.Method, Path: b.Path, Body: b.Body, Arguments: ib.Arguments,
		Price: b.Price, Justification: b.Justification, RaisedAt: b.RaisedAt, ExpiresAt: b.ExpiresAt,
		Park: time.Duration(b.ParkMs) * time.Millisecond, OnTimeout: b.OnTimeout, LimitsRevision: b.LimitsRevision,
		CallDay: b.Day, AgentUID: b.AgentUID, ConversationName: b.ConversationName, State: msg.AskPending,
	}, nil
}

// record is the ask record of a.
func (a *ask) record() hostlog.Ask {
	return hostlog.Ask{
		Ask: a.ID, Attempt: a.Attempt, Controller: a.Controller, Route: a.Route, Agent: a.Agent,
		Conversation: a.Conversation, Application: a.Application, Operation: a.Operation, Kind: a.Kind,
		RequestSHA256: a.RequestSHA, Method: a.Method, Path: a.Path, Body: a.Body, Price: a.Price,
		Justification: a.Justification, RaisedAt: a.RaisedAt, ExpiresAt: a.ExpiresAt, ParkMs: a.Park.Milliseconds(),
		OnTimeout: a.OnTimeout, LimitsRevision: a.LimitsRevision, Day: a.CallDay, AgentUID: a.AgentUID,
		ConversationName: a.ConversationName,
	}
}

// askAttempt is the attempt an ask holds: awaiting approval, nothing
// reserved or held (its id is taken).
func askAttempt(a *ask) *attempt {
	return &attempt{ID: a.Attempt, Controller: a.Controller, Application: a.Application, State: msg.StateAwaitingApproval,
		Agent: a.Agent, Conversation: a.Conversation, Ask: a.ID}
}

// ask replays an ask record: the ask, pending, and its attempt awaiting
// approval with nothing held.
func (rp *replayer) Ask(r journal.Record, b *hostlog.Ask) error {
	st := rp.st
	if seen, err := st.askSeenBefore(b.Ask, r.Seq); err != nil || seen {
		return lookupOr(err, fmt.Errorf("ask %s raised twice", b.Ask))
	}
	if seen, err := st.seenBefore(b.Attempt, r.Seq); err != nil || seen {
		return lookupOr(err, fmt.Errorf("ask %s: attempt %s was recorded before its ask", b.Ask, b.Attempt))
	}
	if _, err := st.controller(b.Controller); err != nil {
		return err
	}
	a, err := askOf(b)
	if err != nil {
		return err
	}
	at := askAttempt(a)
	at.First = r.Seq
	st.Attempts[a.Attempt] = at
	st.addAsk(a, r.Seq)
	st.askCall(a) // its call counts from its record: a restart refills nothing
	return nil
}

// askAnswer replays an answer: the first answer wins, so an answer to an
// ask that is not pending is a journal no host writes.
func (rp *replayer) AskAnswer(r journal.Record, b *hostlog.AskAnswer) error {
	a, err := rp.st.pendingAsk(b.Ask)
	if err != nil {
		return err
	}
	state := msg.AskApproved
	switch b.Verdict {
	case msg.VerdictApprove:
	case msg.VerdictDeny:
		state = msg.AskDenied
	default:
		return fmt.Errorf("ask %s: answer verdict %q is neither approve nor deny", b.Ask, b.Verdict)
	}
	if err := hostlog.CheckAnswerWindow(b, a.OnTimeout); err != nil {
		return err
	}
	a.CollectBy = b.CollectBy
	rp.st.decideAsk(a, r.Seq, state, b.Verdict, b.By, b.Account, b.Advisor, b.Note, b.At)
	rp.st.attemptAnswered(a)
	return nil
}

// askExpired replays an expiry to the ask's on-timeout verdict.
func (rp *replayer) AskExpired(r journal.Record, b *hostlog.AskExpired) error {
	a, err := rp.st.pendingAsk(b.Ask)
	if err != nil {
		return err
	}
	if b.Verdict != a.OnTimeout {
		return fmt.Errorf("ask %s expires to %s, not its on-timeout verdict %s", b.Ask, b.Verdict, a.OnTimeout)
	}
	rp.st.decideAsk(a, r.Seq, msg.AskExpired, b.Verdict, hostlog.AnsweredByExpiry, "", "", "", b.At)
	rp.st.attemptAnswered(a)
	return nil
}

// pendingAsk is ask id, which must be pending.
func (st *state) pendingAsk(id string) (*ask, error) {
	a, ok := st.Asks[id]
	if !ok {
		return nil, fmt.Errorf("ask %s has no ask record", id)
	}
	if a.State != msg.AskPending {
		return nil, fmt.Errorf("ask %s is answered twice: it is already %s", id, a.State)
	}
	return a, nil
}

// attemptAnswered gives an ask's attempt, while it is still the ask's,
// the ask's answerer: every receipt of the attempt names it.
func (st *state) attemptAnswered(a *ask) {
	if at := st.Attempts[a.Attempt]; at != nil && at.Ask == a.ID {
		at.AnsweredBy = a.AnsweredBy
	}
}

// askedAttempt is the attempt a reserve or refused record (at seq) ends
// or goes on with: a new one, or the one awaiting approval an ask record
// made, whose ask (and answerer) it keeps. Any other attempt with the id,
// live or in the history index from another record, is a journal no host
// writes.
func (st *state) askedAttempt(id string, seq uint64, what string, dupErr error) (prior *attempt, err error) {
	prior, dup := st.Attempts[id]
	if !dup {
		if seen, err := st.seenBefore(id, seq); err != nil || seen {
			return nil, lookupOr(err, dupErr)
		}
		return nil, nil
	}
	if prior.State != msg.StateAwaitingApproval {
		return nil, dupErr
	}
	if a := st.Asks[prior.Ask]; a == nil || a.State == msg.AskPending {
		return nil, fmt.Errorf("attempt %s %s while its ask %s is pending", id, what, prior.Ask)
	}
	return prior, nil
}
