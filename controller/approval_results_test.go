package controller

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire/msg"
)

// TestApprovalResults: the results of a call to an operation marked for
// approval validate against oracle_call's output schema (both drafts):
// the pending result (awaiting-approval, isError false, its ask with
// expiry and on-timeout verdict, a detail saying how to collect), an
// answer naming its ask and who answered, and a denial (refused, code
// denied, its receipt and charge 0).
func TestApprovalResults(t *testing.T) {
	exp := time.Date(2026, 12, 2, 15, 4, 5, 0, time.UTC)
	pending := pendingResult("a1", &msg.AskTicket{ID: "ask-0123456789ab", ParkUntil: exp.UnixMilli(), ExpiresAt: exp.UnixMilli(), OnTimeout: msg.VerdictDeny})
	wantDetail := "the call waits for approval (ask ask-0123456789ab): call oracle_call again with the same requestId and arguments to collect the verdict; " +
		"unanswered, the ask expires at 2026-12-02T15:04:05Z to deny (the call is then refused, nothing charged)"
	if pending.Detail != wantDetail || strings.Contains(pending.Detail, "\n") {
		t.Errorf("pending detail:\n got %s\nwant %s", pending.Detail, wantDetail)
	}
	approved := fromResult(ledger.Result{Attempt: "a1", Outcome: msg.StateDefinite, Status: 200, Body: []byte(`{"ok":true}`),
		Receipt: []byte{1}, Charge: 1, Ask: "ask-0123456789ab", AnsweredBy: "uid:1001"})
	denied := fromResult(ledger.Result{Attempt: "a1", Outcome: msg.StateRefused, Receipt: []byte{1}, Ask: "ask-0123456789ab", AnsweredBy: "agent:rev",
		Refusal: &msg.Refusal{Code: msg.CodeDenied, Reason: "the call's approval was denied (ask ask-0123456789ab, by agent:rev): no; nothing was reserved, sent or charged"}})
	for _, tc := range []struct {
		name  string
		r     *ToolResult
		isErr bool
		want  map[string]any
	}{
		{"pending", pending, false, map[string]any{"outcome": "awaiting-approval", "attemptId": "a1",
			"ask": map[string]any{"id": "ask-0123456789ab", "expiresAt": "2026-12-02T15:04:05Z", "onTimeout": "deny"}, "detail": wantDetail}},
		{"approved", approved, false, map[string]any{"outcome": "definite", "ask": map[string]any{"id": "ask-0123456789ab"}, "answeredBy": "uid:1001", "charge": 1.0}},
		{"denied", denied, true, map[string]any{"outcome": "refused", "ask": map[string]any{"id": "ask-0123456789ab"}, "answeredBy": "agent:rev", "charge": 0.0}},
	} {
		res, err := structured(tc.r, "", tc.r.IsError())
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError != tc.isErr {
			t.Errorf("%s: isError %v, want %v", tc.name, res.IsError, tc.isErr)
		}
		checkToolResult(t, ToolCall, res)
		var got map[string]any
		json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got)
		for k, v := range tc.want {
			g, _ := json.Marshal(got[k])
			w, _ := json.Marshal(v)
			if string(g) != string(w) {
				t.Errorf("%s: %s = %s, want %s", tc.name, k, g, w)
			}
		}
	}
	if denied.Refusal.Code != msg.CodeDenied || denied.ReceiptID == "" {
		t.Errorf("denied: %+v", denied)
	}
}

// TestJustificationBound: a justification of msg.MaxJustification bytes is
// taken, one past is refused in steward's words, as is one of two lines;
// both before anything is looked up or journaled (checkJustification runs
// in planCall before the route's lookup).
func TestJustificationBound(t *testing.T) {
	if err := checkJustification(strings.Repeat("é", msg.MaxJustification/2)); err != nil {
		t.Fatalf("%d bytes: %v", msg.MaxJustification, err)
	}
	for _, tc := range []struct{ j, want string }{
		{strings.Repeat("x", msg.MaxJustification+1), "arguments refused: justification: 513 bytes, at most 512"},
		{"two\nlines", "arguments refused: justification: must be one line, without line breaks"},
		{"cr\rhere", "arguments refused: justification: must be one line, without line breaks"},
	} {
		if err := checkJustification(tc.j); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.j[:min(len(tc.j), 12)], err, tc.want)
		}
	}
}
