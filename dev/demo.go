package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stewardrt/steward/controller"
)

// The demonstration's call: the fraction of a year Mars takes to go round the
// Sun, in exact arithmetic.
const (
	demoApplication = "appliance"
	demoOperation   = "calc.evaluate"
	demoExpression  = "3 * 687 / 365.25"
	demoAnswer      = "2748/487"
)

// toolResult is the structured result of the controller's tools (the
// application reply envelope of DESIGN.md section 7).
type toolResult struct {
	Outcome   string          `json:"outcome"`
	Status    int             `json:"status"`
	Body      json.RawMessage `json:"body"` // the application's JSON answer
	AttemptID string          `json:"attemptId"`
	ReceiptID string          `json:"receiptId"`
	Replayed  bool            `json:"replayed"`
}

// demo runs the --once demonstration through the MCP socket, as an agent
// would: overview, a discovery of calc, one call, the same call again. It
// checks what each step must show (the exact answer, the charge of one
// credit, the replay with no second charge) and fails on the first step
// that does not. balance reads the dev purse. It returns the receipt ids seen.
func demo(ctx context.Context, w io.Writer, mcpSocket string, balance func() (uint64, error)) ([]string, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", mcpSocket)
	if err != nil {
		return nil, fmt.Errorf("demo: dial the MCP socket %s: %w", mcpSocket, err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "steward-dev-demo", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("demo: MCP initialize over %s: %w", mcpSocket, err)
	}
	defer cs.Close()

	start, err := balance()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\n== demonstration through the MCP socket %s\n", mcpSocket)
	fmt.Fprintf(w, "purse balance: %d credits\n", start)

	fmt.Fprintf(w, "\n-- 1. steward_overview\n")
	if _, err := callTool(ctx, w, cs, "steward_overview", map[string]any{}); err != nil {
		return nil, err
	}

	fmt.Fprintf(w, "\n-- 2. oracle_discover {application: %s, query: calc}\n", demoApplication)
	disc, err := callTool(ctx, w, cs, controller.ToolDiscover, map[string]any{"application": demoApplication, "query": "calc"})
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(disc.Body), demoOperation) {
		return nil, fmt.Errorf("demo: the discovery of calc does not list %s", demoOperation)
	}

	requestID := "dev-demo-" + randomHex(8)
	call := map[string]any{
		"application":    demoApplication,
		"requestId":      requestID,
		"conversationId": "dev-demo",
		"operationId":    demoOperation,
		"arguments":      map[string]any{"expression": demoExpression},
	}
	afterDiscover, err := balance()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "purse balance: %d credits (charged %d)\n", afterDiscover, start-afterDiscover)
	fmt.Fprintf(w, "\n-- 3. oracle_call %s {expression: %q} requestId %s\n", demoOperation, demoExpression, requestID)
	first, err := callTool(ctx, w, cs, controller.ToolCall, call)
	if err != nil {
		return nil, err
	}
	if first.Status != 200 || !strings.Contains(string(first.Body), demoAnswer) {
		return nil, fmt.Errorf("demo: %s answered status %d %q, want 200 with %s", demoOperation, first.Status, first.Body, demoAnswer)
	}
	if first.Replayed || first.ReceiptID == "" {
		return nil, fmt.Errorf("demo: the first call was replayed=%v with receipt %q, want a fresh call with a receipt", first.Replayed, first.ReceiptID)
	}
	afterCall, err := balance()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "purse balance: %d credits (charged %d)\n", afterCall, afterDiscover-afterCall)
	if afterDiscover-afterCall != 1 {
		return nil, fmt.Errorf("demo: the call charged %d credits, want 1", afterDiscover-afterCall)
	}

	fmt.Fprintf(w, "\n-- 4. the same oracle_call again (same requestId, same arguments)\n")
	second, err := callTool(ctx, w, cs, controller.ToolCall, call)
	if err != nil {
		return nil, err
	}
	if !second.Replayed || second.ReceiptID != first.ReceiptID || string(second.Body) != string(first.Body) {
		return nil, fmt.Errorf("demo: the repeated call was replayed=%v receipt %s, want the recorded answer with receipt %s", second.Replayed, second.ReceiptID, first.ReceiptID)
	}
	afterReplay, err := balance()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "purse balance: %d credits (charged %d: replayed from the journal)\n", afterReplay, afterCall-afterReplay)
	if afterReplay != afterCall {
		return nil, fmt.Errorf("demo: the replay charged %d credits, want 0", afterCall-afterReplay)
	}
	var receipts []string
	for _, r := range []toolResult{disc, first} {
		if r.ReceiptID != "" {
			receipts = append(receipts, r.ReceiptID)
		}
	}
	return receipts, nil
}

// callTool makes one tools/call, prints its structured result and returns it.
// A steward refusal (isError) is an error of the demonstration.
func callTool(ctx context.Context, w io.Writer, cs *mcp.ClientSession, name string, args map[string]any) (toolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return toolResult{}, fmt.Errorf("demo: %s: %w", name, err)
	}
	text := resultText(res)
	if res.IsError {
		return toolResult{}, fmt.Errorf("demo: %s refused: %s", name, text)
	}
	var r toolResult
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return toolResult{}, err
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return toolResult{}, fmt.Errorf("demo: %s result: %w", name, err)
		}
		text = string(b)
	}
	if r.Outcome == "" {
		fmt.Fprintf(w, "result: %s\n", text)
		return r, nil
	}
	fmt.Fprintf(w, "outcome %s, status %d, replayed %v\n", r.Outcome, r.Status, r.Replayed)
	if ids := operationIDs(r.Body); ids != nil {
		fmt.Fprintf(w, "operations: %s\n", strings.Join(ids, ", "))
	} else {
		fmt.Fprintf(w, "body: %s\n", abbreviate(string(r.Body), 400))
	}
	fmt.Fprintf(w, "receipt %s (attempt %s)\n", r.ReceiptID, r.AttemptID)
	return r, nil
}

// resultText joins the text content of a tool result.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// operationIDs lists the operation ids of a discovery answer, or nil when
// the body is not a list reply.
func operationIDs(body json.RawMessage) []string {
	var list struct {
		Operations []struct {
			ID string `json:"id"`
		} `json:"operations"`
	}
	if json.Unmarshal(body, &list) != nil || list.Operations == nil {
		return nil
	}
	ids := []string{}
	for _, op := range list.Operations {
		ids = append(ids, op.ID)
	}
	return ids
}

// abbreviate cuts s to at most n bytes (at a rune boundary), saying how long
// it was.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}
