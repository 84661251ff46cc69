package controller

import (
	"sync"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/wire/msg"
)

// The result record off the serial path (DESIGN.md section 5, step 7).
//
// A definite answer whose receipt verified goes back to the agent at once,
// and its result record is journaled beside it: the host journaled its
// outcome before it answered, so the host's record is the durable truth of
// what was done and charged, and the receipt the agent holds proves it. A
// controller that dies between the answer and its result record restarts
// with a begin and no result: the attempt is uncertain, and the next call
// with its requestId asks the host (learnResolution), which answers with
// the same body and receipt, journaled as a resolution and replayed from
// it. Nothing is sent to the application again, nothing is charged again.
//
// Every other end (a refusal, an uncertain or unfinished attempt, an
// answer awaiting approval) is journaled before it is answered, as before:
// those are the ends the host's record alone does not settle.

// FailAfterReply holds the goroutine that journals a definite answer's
// result record once the answer has gone back to the agent: a test then
// kills the controller with the answer out and no result on disk.
const FailAfterReply = "controller-after-reply"

// offPath reports whether res may be answered before its result record is
// durable: a definite answer with a receipt that verified (checkResult has
// already set its charge from it).
func offPath(res ledger.Result) bool {
	return res.Outcome == msg.StateDefinite && res.Receipt != nil
}

// resultWrites are the result records being journaled after their
// answers went out, by attempt.
type resultWrites struct {
	// mu guards pending; it is never held while a record is written.
	mu      sync.Mutex
	pending map[string]chan struct{} // closed when the attempt's record is written or refused
	wg      sync.WaitGroup
}

func newResultWrites() *resultWrites {
	return &resultWrites{pending: map[string]chan struct{}{}}
}

// start runs write for attempt id in a goroutine of its own.
func (w *resultWrites) start(id string, write func()) {
	done := make(chan struct{})
	w.mu.Lock()
	w.pending[id] = done
	w.mu.Unlock()
	w.wg.Go(func() {
		defer func() {
			w.mu.Lock()
			delete(w.pending, id)
			w.mu.Unlock()
			close(done)
		}()
		write()
	})
}

// wait waits for attempt id's result record when one is being written and
// reports whether it waited: a call with the same requestId that found the
// attempt still pending then reads the ledger again.
func (w *resultWrites) wait(id string) bool {
	w.mu.Lock()
	done, ok := w.pending[id]
	w.mu.Unlock()
	if ok {
		<-done
	}
	return ok
}

// drain waits for every result record being written. Close calls it with
// the gate write-held, so no new one starts.
func (w *resultWrites) drain() { w.wg.Wait() }

// writeAfterReply journals the result of attempt id, whose answer has
// gone to the agent, in a goroutine of its own.
func (c *Controller) writeAfterReply(id string, res ledger.Result) {
	c.writes.start(id, func() {
		failpoint.Hold(FailAfterReply)
		c.writeResult(id, res)
	})
}

// writeResult journals the result of attempt id and settles its consent,
// or, when the journal refuses it, leaves the attempt unfinished (uncertain
// until the host is asked) and reports false.
func (c *Controller) writeResult(id string, res ledger.Result) bool {
	rplace, err := c.j.AppendAt(ledger.KindResult, res)
	if err != nil {
		// What was consented stays counted for the day: the attempt may
		// have been charged, and nothing on disk says otherwise.
		c.pay.forget(id)
		c.led.Unfinished(id, "the result could not be journaled")
		c.log.Error("journal result failed; the attempt is uncertain", "attempt", id, "err", err)
		return false
	}
	c.pay.settle(id, &res)
	c.led.Finish(res, rplace)
	return true
}
