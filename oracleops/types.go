package oracleops

import "encoding/json"

// Protocol is the name of the application protocol this package speaks.
const Protocol = "oracle-operations-v1"

// Availability says whether an operation can be invoked.
type Availability string

// The availabilities of an operation. Only AvailabilityLiveDirect
// operations can be invoked; discovery lists the others so that a user
// sees what an application cannot do.
const (
	AvailabilityLiveDirect  Availability = "live_direct"
	AvailabilityTextOnly    Availability = "text_only"
	AvailabilityUnavailable Availability = "unavailable"
	// AvailabilityAny is a discovery filter only, matching all three. No
	// descriptor has it.
	AvailabilityAny Availability = "any"
)

// Valid reports whether a is one of the three availabilities a descriptor
// may have.
func (a Availability) Valid() bool {
	switch a {
	case AvailabilityLiveDirect, AvailabilityTextOnly, AvailabilityUnavailable:
		return true
	}
	return false
}

// Descriptor describes one operation of an application.
type Descriptor struct {
	ID           string          `json:"id"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	Availability Availability    `json:"availability"`
	InputSchema  json.RawMessage `json:"input_schema"` // a JSON Schema (2020-12) object
	Units        []string        `json:"units"`        // the units of measure the operation reads or answers
	Sources      []string        `json:"sources"`      // where its definitions and constants come from
	Examples     []Example       `json:"examples"`
}

// Example is one call of an operation and the result it answers.
type Example struct {
	Title     string          `json:"title"`
	Arguments json.RawMessage `json:"arguments"` // valid against the descriptor's input_schema
	Result    json.RawMessage `json:"result"`    // the "result" member of the answer
}

// ListReply is the answer to GET PREFIX/operations.
type ListReply struct {
	Operations []Descriptor `json:"operations"`
	NextOffset *int         `json:"next_offset"` // null on the last page
	Limits     Limits       `json:"limits"`
}

// Limits are the application's own bounds, announced with every listing.
type Limits struct {
	RequestBytes int `json:"request_bytes"` // largest invocation body it accepts
}

// InvokeBody is the body of POST PREFIX/invoke. Encode gives its one
// canonical encoding.
type InvokeBody struct {
	Arguments      json.RawMessage `json:"arguments"` // a JSON object
	ConversationID string          `json:"conversationId"`
	OperationID    string          `json:"operationId"`
	RequestID      string          `json:"requestId"`
}

// ListQuery is a discovery: search text, availability filter and page.
type ListQuery struct {
	Query        string       // "" matches everything
	Availability Availability // "" means AvailabilityLiveDirect
	Limit        int          // 0 means DefaultLimit
	Offset       int
}

// normalized fills in the defaults and validates every field.
func (q ListQuery) normalized() (ListQuery, error) {
	if q.Availability == "" {
		q.Availability = AvailabilityLiveDirect
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if err := ValidateQuery(q.Query); err != nil {
		return q, err
	}
	if err := ValidateAvailabilityFilter(q.Availability); err != nil {
		return q, err
	}
	if err := ValidateLimit(q.Limit); err != nil {
		return q, err
	}
	if err := ValidateOffset(q.Offset); err != nil {
		return q, err
	}
	return q, nil
}
