package appliance

import (
	"encoding/json"
	"net/http"

	"github.com/stewardrt/steward/oracleops"
)

// Error codes of the appliance's error answers (see doc.go).
const (
	codeBadRequest       = "bad_request"
	codeNotFound         = "not_found"
	codeTooLarge         = "too_large"
	codeInvalidArguments = "invalid_arguments"
	codeRefused          = "refused"
	codeUnavailable      = "unavailable"
	codeConflict         = "conflict"
	codeArchived         = "archived"
	codeBusy             = "busy"
	codeFault            = "fault"
	codeTimeout          = "timeout"
)

// refusal is an error answer: an HTTP status and the error object.
type refusal struct {
	status  int
	code    string
	message string
	details any // nil is written as null
}

func (r *refusal) Error() string { return r.code + ": " + r.message }

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details"`
}

type successBody struct {
	OperationID string          `json:"operationId"`
	Result      json.RawMessage `json:"result"`
}

// encode gives the canonical JSON bytes of an answer body, so that the
// same answer is always the same bytes.
func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return oracleops.CanonicalJSON(b)
}

func (r *refusal) body() []byte {
	b, err := encode(errorBody{errorObject{r.code, r.message, r.details}})
	if err != nil {
		// Details are built from plain values; this cannot fail, and if
		// it does the answer still has the stable shape.
		b, _ = encode(errorBody{errorObject{codeFault, "encoding an error answer failed", nil}})
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}

func writeRefusal(w http.ResponseWriter, r *refusal) {
	writeJSON(w, r.status, r.body())
}

func badRequest(err error) *refusal {
	return &refusal{status: http.StatusBadRequest, code: codeBadRequest, message: err.Error()}
}
