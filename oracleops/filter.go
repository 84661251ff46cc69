package oracleops

import "encoding/json"

// FilteredPage is one page of an application's listing as the host reads
// it to filter it (a grant's operation patterns): its limits, where the
// next page starts, and its operations as they were sent.
type FilteredPage struct {
	Limits     json.RawMessage   `json:"limits"`
	NextOffset *int              `json:"next_offset"`
	Operations []json.RawMessage `json:"operations"`
}

// FilterPage parses one page of a listing and keeps the operations whose
// id keep reports true, as they were sent.
func FilterPage(body []byte, keep func(id string) bool) (FilteredPage, []json.RawMessage, error) {
	var p FilteredPage
	if err := json.Unmarshal(body, &p); err != nil {
		return p, nil, err
	}
	kept := make([]json.RawMessage, 0, len(p.Operations))
	for _, op := range p.Operations {
		var id struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(op, &id); err != nil {
			return p, nil, err
		}
		if id.ID != "" && keep(id.ID) {
			kept = append(kept, op)
		}
	}
	return p, kept, nil
}

// FaultBody is the body of a fault steward answers in an application's
// stead: {"error": {"code": "fault", "message": "steward: MESSAGE"}}.
func FaultBody(message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "fault", "message": "steward: " + message}})
	return b
}
