package oracleops_test

import (
	"encoding/json"
	"fmt"

	"github.com/stewardrt/steward/oracleops"
)

// Example builds the one canonical invoke request of oracle-operations-v1:
// the body's keys sorted at every level and compact, whatever order the
// caller wrote the arguments in, so the controller and the host hash the
// same bytes.
func Example() {
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{
		Arguments:      json.RawMessage(`{ "to": "m", "from": "km", "value": "1.5" }`),
		ConversationID: "c-1",
		OperationID:    "units.convert",
		RequestID:      "r-1",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(req.Method, req.Path)
	fmt.Println(string(req.Body))
	// Output:
	// POST /v1/invoke
	// {"arguments":{"from":"km","to":"m","value":"1.5"},"conversationId":"c-1","operationId":"units.convert","requestId":"r-1"}
}
