package appliance

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/oracleops"
)

// testHookRunning, when set by a test, is called while an invocation
// holds its operation's slot, before the operation runs.
var testHookRunning func(operationID string)

// handleInvoke answers POST PREFIX/invoke. The order is the contract:
//
//  1. a body over oracleops.MaxInvokeBody is refused (413) before it is
//     read whole; a malformed one is refused (400). Neither is journaled:
//     without a valid body there is no request id to record.
//  2. a request id already answered replays the recorded status and body
//     byte for byte when the canonical body hashes the same, and is a 409
//     conflict otherwise; nothing runs. One whose answer `history
//     archive` moved out is refused, 409 archived, and nothing runs
//     either (archivedRefusal). An answer that cannot be read
//     (the history index or the journal failing) is a 500 fault, and
//     nothing runs either.
//  3. the operation is looked up (404), its availability checked (403),
//     the arguments validated against its schema (422), a slot taken
//     (429 busy when its cap is reached: not journaled, nothing ran) and
//     it runs.
//  4. the answer is journaled (fdatasync) before a byte of it is sent.
//     If the journal refuses, the answer is a 500 fault and nothing is
//     recorded.
func (s *Server) handleInvoke(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if r.ContentLength > oracleops.MaxInvokeBody {
		// Refused on the announced length, before reading any of it.
		w.Header().Set("Connection", "close")
		writeRefusal(w, tooLarge(r.ContentLength))
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, oracleops.MaxInvokeBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRefusal(w, tooLarge(-1))
			return
		}
		writeRefusal(w, badRequest(fmt.Errorf("reading the body: %w", err)))
		return
	}
	inv, err := oracleops.ParseInvokeBody(raw)
	if err != nil {
		writeRefusal(w, badRequest(err))
		return
	}
	canon, err := inv.Encode()
	if err != nil {
		writeRefusal(w, badRequest(err))
		return
	}
	sum := sha256.Sum256(canon)

	rec, conflict, p, err := s.ledger.claim(r.Context().Done(), inv.RequestID, sum)
	var archived *archivedAnswer
	switch {
	case errors.Is(err, errClientGone):
		return // there is no one to answer
	case errors.As(err, &archived):
		s.log.Info("invoke refused: its answer is archived", "requestId", inv.RequestID, "archive", archived.archive)
		writeRefusal(w, archivedRefusal(archived))
		return
	case err != nil:
		s.log.Error("reading a recorded answer failed; refusing the invocation", "requestId", inv.RequestID, "err", err)
		writeRefusal(w, &refusal{status: http.StatusInternalServerError, code: codeFault, message: "the recorded answers could not be read"})
		return
	case conflict:
		s.log.Debug("invoke conflict", "requestId", inv.RequestID, "operationId", inv.OperationID)
		writeRefusal(w, &refusal{status: http.StatusConflict, code: codeConflict,
			message: "requestId " + strconv.Quote(inv.RequestID) + " was already used with a different body",
			details: map[string]any{"requestId": inv.RequestID}})
		return
	case rec != nil:
		s.log.Debug("invoke replay", "requestId", inv.RequestID, "status", rec.status)
		writeJSON(w, rec.status, rec.response)
		return
	}
	defer s.ledger.release(inv.RequestID, p)

	status, response, journaled := s.executeBounded(inv)
	if journaled {
		failpoint.Hit("appliance-before-journal")
		if err := s.ledger.record(inv.RequestID, sum, status, response); err != nil {
			s.log.Error("journaling an answer failed; refusing the invocation", "requestId", inv.RequestID, "err", err)
			writeRefusal(w, &refusal{status: http.StatusInternalServerError, code: codeFault, message: "the answer could not be journaled"})
			return
		}
		failpoint.Hit("appliance-after-journal")
	}
	s.log.Debug("invoke", "requestId", inv.RequestID, "operationId", inv.OperationID, "status", status)
	writeJSON(w, status, response)
}

// executeBounded is execute within Config.HandlerTimeout. An operation
// that runs past it is abandoned: the invocation is answered 503 timeout,
// which is journaled like any answer to a well-formed invocation (the
// same requestId replays it; the operation's late answer is dropped), and
// the connection's slot is freed with the answer. The operation's own slot
// stays taken until it returns: a goroutine cannot be stopped, and the
// operation's cap (429 busy) bounds how many can pile up.
func (s *Server) executeBounded(inv oracleops.InvokeBody) (status int, response []byte, journaled bool) {
	type result struct {
		status    int
		response  []byte
		journaled bool
	}
	done := make(chan result, 1)
	go func() {
		st, resp, j := s.execute(inv)
		done <- result{st, resp, j}
	}()
	bound := time.NewTimer(s.cfg.HandlerTimeout)
	defer bound.Stop()
	select {
	case r := <-done:
		return r.status, r.response, r.journaled
	case <-bound.C:
	}
	s.log.Warn("an invocation ran past the handler bound; answered timeout and abandoned",
		"requestId", inv.RequestID, "operationId", inv.OperationID, "bound", s.cfg.HandlerTimeout)
	r := &refusal{status: http.StatusServiceUnavailable, code: codeTimeout,
		message: fmt.Sprintf("operation %s ran past the bound of %v and was abandoned; this answer is recorded for its requestId", inv.OperationID, s.cfg.HandlerTimeout),
		details: map[string]any{"boundMs": s.cfg.HandlerTimeout.Milliseconds()}}
	return r.status, r.body(), true
}

// execute runs an invocation and gives its answer, and whether the
// answer is to be journaled (every answer but busy and faults, which
// promise nothing about a retry).
func (s *Server) execute(inv oracleops.InvokeBody) (status int, response []byte, journaled bool) {
	op := s.cat.byID[inv.OperationID]
	if op == nil {
		r := unknownOperation(inv.OperationID)
		return r.status, r.body(), true
	}
	if op.desc.Availability != oracleops.AvailabilityLiveDirect {
		r := &refusal{status: http.StatusForbidden, code: codeUnavailable,
			message: "operation " + op.desc.ID + " is " + string(op.desc.Availability) + " and cannot be invoked",
			details: map[string]any{"availability": op.desc.Availability}}
		return r.status, r.body(), true
	}
	if err := op.schema.Validate(inv.Arguments); err != nil {
		r := &refusal{status: http.StatusUnprocessableEntity, code: codeInvalidArguments, message: err.Error()}
		var ae *oracleops.ArgumentsError
		if errors.As(err, &ae) {
			r.details = map[string]any{"violations": ae.Violations, "omitted": ae.Omitted}
		}
		return r.status, r.body(), true
	}
	select {
	case op.slots <- struct{}{}:
	default:
		r := &refusal{status: http.StatusTooManyRequests, code: codeBusy,
			message: fmt.Sprintf("operation %s is running %d invocations, its cap; try again", op.desc.ID, op.capacity),
			details: map[string]any{"capacity": op.capacity}}
		return r.status, r.body(), false
	}
	result, ref, panicked := s.run(op, inv)
	<-op.slots
	switch {
	case panicked:
		r := &refusal{status: http.StatusInternalServerError, code: codeFault, message: "the operation failed"}
		return r.status, r.body(), false
	case ref != nil:
		return ref.status, ref.body(), true
	}
	body, err := encode(successBody{OperationID: op.desc.ID, Result: result})
	if err != nil {
		s.log.Error("encoding an answer failed", "operationId", op.desc.ID, "err", err)
		r := &refusal{status: http.StatusInternalServerError, code: codeFault, message: "the answer could not be encoded"}
		return r.status, r.body(), false
	}
	return http.StatusOK, body, true
}

// run calls the operation, turning a panic into a logged fault.
func (s *Server) run(op *operation, inv oracleops.InvokeBody) (result []byte, ref *refusal, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("operation panicked", "operationId", op.desc.ID, "requestId", inv.RequestID, "panic", v)
			panicked = true
		}
	}()
	if testHookRunning != nil {
		testHookRunning(op.desc.ID)
	}
	v, ref := op.run(inv.Arguments)
	if ref != nil {
		return nil, ref, false
	}
	b, err := encode(v)
	if err != nil {
		panic(fmt.Sprintf("encoding the result: %v", err))
	}
	return b, nil, false
}

// archivedRefusal answers a request id whose answer is archived. It is
// the appliance's conflict status, 409: the id is taken, its answer was
// given and is never given again, and the caller must use a new id; a
// 500 fault would say nothing is known and invite sending the same id
// again. The code is its own, "archived", so that a caller can tell it
// from another body under the id; the message names the archive, never a
// path.
func archivedRefusal(a *archivedAnswer) *refusal {
	return &refusal{status: http.StatusConflict, code: codeArchived, message: a.Error(),
		details: map[string]any{"archive": a.archive, "requestId": a.id}}
}

func tooLarge(n int64) *refusal {
	msg := fmt.Sprintf("invocation body exceeds the bound of %d bytes", oracleops.MaxInvokeBody)
	if n >= 0 {
		msg = fmt.Sprintf("invocation body: %d bytes exceeds the bound of %d", n, oracleops.MaxInvokeBody)
	}
	return &refusal{status: http.StatusRequestEntityTooLarge, code: codeTooLarge, message: msg,
		details: map[string]any{"limit": oracleops.MaxInvokeBody}}
}
