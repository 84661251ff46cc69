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
	return &ask{
		id: b.Ask, attempt: b.Attempt, controller: b.Controller, route: b.Route, agent: b.Agent,
		conversation: b.Conversation, application: b.Application, operation: b.Operation, kind: b.Kind,
		requestSHA: b.RequestSHA256, method: b.Method, path: b.Path, body: b.Body, arguments: ib.Arguments,
		price: b.Price, justification: b.Justification, raisedAt: b.RaisedAt, expiresAt: b.ExpiresAt,
		park: time.Duration(b.ParkMs) * time.Millisecond, onTimeout: b.OnTimeout, limitsRevision: b.LimitsRevision,
		state: msg.AskPending,
	}, nil
}

// record is the ask record of a.
func (a *ask) record() hostlog.Ask {
	return hostlog.Ask{
		Ask: a.id, Attempt: a.attempt, Controller: a.controller, Route: a.route, Agent: a.agent,
		Conversation: a.conversation, Application: a.application, Operation: a.operation, Kind: a.kind,
		RequestSHA256: a.requestSHA, Method: a.method, Path: a.path, Body: a.body, Price: a.price,
		Justification: a.justification, RaisedAt: a.raisedAt, ExpiresAt: a.expiresAt, ParkMs: a.park.Milliseconds(),
		OnTimeout: a.onTimeout, LimitsRevision: a.limitsRevision,
	}
}

// askAttempt is the attempt an ask holds: awaiting approval, nothing
// reserved or held (its id is taken).
func askAttempt(a *ask) *attempt {
	return &attempt{id: a.attempt, controller: a.controller, application: a.application, state: msg.StateAwaitingApproval,
		agent: a.agent, conversation: a.conversation, ask: a.id}
}

// ask replays an ask record: the ask, pending, and its attempt awaiting
// approval with nothing held.
func (rp *replayer) Ask(r journal.Record, b *hostlog.Ask) error {
	st := rp.st
	if _, dup := st.asks[b.Ask]; dup {
		return fmt.Errorf("ask %s raised twice", b.Ask)
	}
	if _, dup := st.attempts[b.Attempt]; dup {
		return fmt.Errorf("ask %s: attempt %s was recorded before its ask", b.Ask, b.Attempt)
	}
	if _, err := st.controller(b.Controller); err != nil {
		return err
	}
	a, err := askOf(b)
	if err != nil {
		return err
	}
	st.attempts[a.attempt] = askAttempt(a)
	st.addAsk(a, r.Seq)
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
	if b.Verdict != a.onTimeout {
		return fmt.Errorf("ask %s expires to %s, not its on-timeout verdict %s", b.Ask, b.Verdict, a.onTimeout)
	}
	rp.st.decideAsk(a, r.Seq, msg.AskExpired, b.Verdict, hostlog.AnsweredByExpiry, "", "", "", b.At)
	rp.st.attemptAnswered(a)
	return nil
}

// pendingAsk is ask id, which must be pending.
func (st *state) pendingAsk(id string) (*ask, error) {
	a, ok := st.asks[id]
	if !ok {
		return nil, fmt.Errorf("ask %s has no ask record", id)
	}
	if a.state != msg.AskPending {
		return nil, fmt.Errorf("ask %s is answered twice: it is already %s", id, a.state)
	}
	return a, nil
}

// attemptAnswered gives an ask's attempt, while it is still the ask's,
// the ask's answerer: every receipt of the attempt names it.
func (st *state) attemptAnswered(a *ask) {
	if at := st.attempts[a.attempt]; at != nil && at.ask == a.id {
		at.answeredBy = a.answeredBy
	}
}

// askedAttempt is the attempt a reserve or refused record ends or goes on
// with: a new one, or the one awaiting approval an ask record made, whose
// ask (and answerer) it keeps. Any other attempt with the id is a
// journal no host writes.
func (st *state) askedAttempt(id, what string, dupErr error) (prior *attempt, err error) {
	prior, dup := st.attempts[id]
	if !dup {
		return nil, nil
	}
	if prior.state != msg.StateAwaitingApproval {
		return nil, dupErr
	}
	if a := st.asks[prior.ask]; a == nil || a.state == msg.AskPending {
		return nil, fmt.Errorf("attempt %s %s while its ask %s is pending", id, what, prior.ask)
	}
	return prior, nil
}
