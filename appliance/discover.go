package appliance

import (
	"net/http"
	"strconv"

	"github.com/stewardrt/steward/oracleops"
)

// handleList answers GET PREFIX/operations: a page of the catalog.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, http.MethodGet)
		return
	}
	q, err := oracleops.ParseListQuery(r.URL.RawQuery)
	if err != nil {
		writeRefusal(w, badRequest(err))
		return
	}
	page, next := s.cat.search(q)
	// The operations are already canonical; the envelope's keys are
	// written in sorted order, so the whole answer is canonical too.
	out := make([]byte, 0, 4096)
	out = append(out, `{"limits":{"request_bytes":`...)
	out = strconv.AppendInt(out, oracleops.MaxInvokeBody, 10)
	out = append(out, `},"next_offset":`...)
	if next == nil {
		out = append(out, "null"...)
	} else {
		out = strconv.AppendInt(out, int64(*next), 10)
	}
	out = append(out, `,"operations":[`...)
	for i, op := range page {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, op.encoded...)
	}
	out = append(out, "]}"...)
	writeJSON(w, http.StatusOK, out)
}

// handleDescribe answers GET PREFIX/operations/ID with one descriptor,
// whatever its availability.
func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, http.MethodGet)
		return
	}
	if err := oracleops.ValidateOperationID(id); err != nil {
		writeRefusal(w, badRequest(err))
		return
	}
	op := s.cat.byID[id]
	if op == nil {
		writeRefusal(w, unknownOperation(id))
		return
	}
	writeJSON(w, http.StatusOK, op.encoded)
}

func unknownOperation(id string) *refusal {
	return &refusal{status: http.StatusNotFound, code: codeNotFound, message: "no operation " + strconv.Quote(id),
		details: map[string]any{"operationId": id}}
}
