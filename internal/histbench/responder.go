package histbench

import (
	"context"
	"fmt"
	"strings"

	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/wire/msg"
)

// responder answers the asks the marked calls raise, as a human at
// `steward-operator approvals watch` and `approvals respond` would, on the
// host's admin socket: it follows the ask events from a cursor of journal
// sequence numbers (which a restart of the host keeps) and answers each
// raised ask by its call's justification, leaving justExpire unanswered.
type responder struct {
	s      *stack
	cursor uint64
	cancel context.CancelFunc
	done   chan error
}

// startResponder follows the events after cursor until stopped. A
// failure to follow or answer calls fail with it, so that the generation
// stops at once with the responder's error: the marked calls it leaves
// unanswered would otherwise be asked again until their asks expired.
func startResponder(parent context.Context, s *stack, cursor uint64, fail context.CancelCauseFunc) (*responder, error) {
	cl, err := admin.DialAt(parent, s.l.OperatorStore, s.l.AdminSocket)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	r := &responder{s: s, cursor: cursor, cancel: cancel, done: make(chan error, 1)}
	// Closing the client ends an events request waiting on the host.
	stop := context.AfterFunc(ctx, func() { cl.Close() })
	go func() {
		defer stop()
		err := r.follow(ctx, cl)
		if err != nil {
			fail(fmt.Errorf("the responder: %w", err))
		}
		r.done <- err
	}()
	return r, nil
}

func (r *responder) follow(ctx context.Context, cl admin.Client) error {
	for ctx.Err() == nil {
		rep, err := cl.DoWithin(admin.MaxEventsWait*2, admin.Request{Op: admin.OpApprovalsEvents,
			Approvals: &admin.ApprovalsRequest{After: r.cursor, WaitMs: admin.MaxEventsWait.Milliseconds()}})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("approvals events: %w", err)
		}
		if rep.Approvals == nil {
			continue
		}
		for _, e := range rep.Approvals.Events {
			if err := r.answer(ctx, cl, e.Event, e.Ask); err != nil {
				return err
			}
		}
		r.cursor = max(r.cursor, rep.Approvals.Cursor)
	}
	return nil
}

// answer answers a raised ask by its justification.
func (r *responder) answer(ctx context.Context, cl admin.Client, event string, a msg.AskView) error {
	if event != "raised" || a.State != msg.AskPending {
		return nil
	}
	var v msg.Verdict
	switch a.Justification {
	case justApprove:
		v = msg.VerdictApprove
	case justDeny:
		v = msg.VerdictDeny
	default:
		return nil
	}
	_, err := cl.Do(admin.Request{Op: admin.OpApprovalsRespond,
		Approvals: &admin.ApprovalsRequest{Ask: a.ID, Verdict: v, Note: "histgen: " + a.Justification}})
	// An ask answered before a stop cut the cursor short is answered
	// already: the first answer won, which is all that matters here.
	if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "already answered") {
		return fmt.Errorf("approvals respond %s: %w", a.ID, err)
	}
	return nil
}

// stop ends the responder and returns the cursor to go on from.
func (r *responder) stop() (uint64, error) {
	r.cancel()
	err := <-r.done
	return r.cursor, err
}
