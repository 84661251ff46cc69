package msg

// Dispatch kinds: what the controller asks the host to deliver.
const (
	KindList     = "list"     // GET PREFIX/operations?...
	KindDescribe = "describe" // GET PREFIX/operations/ID
	KindInvoke   = "invoke"   // POST PREFIX/invoke
)

// Dispatch asks the host to admit and deliver one request to an application.
// The controller has journaled `begin` for Attempt before sending it; the
// host recomputes RequestSHA256 from Method, Path and Body and refuses a
// mismatch.
type Dispatch struct {
	Attempt        string `cbor:"attempt"`
	Application    string `cbor:"application"`
	Kind           string `cbor:"kind"`
	Operation      string `cbor:"operation"` // operation id; "" for a list
	Query          string `cbor:"query"`     // search text of a list, for grant filtering
	Method         string `cbor:"method"`
	Path           string `cbor:"path"` // includes the route's prefix and query string
	Body           []byte `cbor:"body"`
	RequestSHA256  []byte `cbor:"requestSha256"`
	RequestID      string `cbor:"requestId"`      // application request id; "" for discovery
	ConversationID string `cbor:"conversationId"` // "" for discovery
}

// Transport outcomes of an attempt.
const (
	OutcomeDefinite  = "definite"  // the application answered; Status and Body are its answer
	OutcomeRefused   = "refused"   // steward refused before anything was sent
	OutcomeNotSent   = "not-sent"  // delivery failed before the first byte; released
	OutcomeUncertain = "uncertain" // sending began and no answer was recorded
)

// DispatchResult is the host's answer to a Dispatch. A definite outcome keeps
// the application's own status and body, refusals included.
type DispatchResult struct {
	Attempt string   `cbor:"attempt"`
	Outcome string   `cbor:"outcome"`
	Status  int      `cbor:"status"`
	Body    []byte   `cbor:"body"`
	Receipt []byte   `cbor:"receipt"` // COSE_Sign1 over a Receipt; nil unless definite
	Refusal *Refusal `cbor:"refusal"` // set when Outcome is refused
	Detail  string   `cbor:"detail"`  // one line on a not-sent or uncertain outcome
}

// Inspect asks the host what it recorded of one attempt.
type Inspect struct {
	Attempt string `cbor:"attempt"`
}

// Attempt states, as the host reports them.
const (
	StateNotSeen           = "not-seen"
	StateDeliveryRequested = "delivery-requested"
	StateNotSent           = "not-sent"
	StateDefinite          = "definite"
	StateUncertain         = "uncertain"
)

// InspectResult is the host's durable record of one attempt.
type InspectResult struct {
	Attempt string `cbor:"attempt"`
	State   string `cbor:"state"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Detail  string `cbor:"detail"`
}
