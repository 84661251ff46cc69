package peertest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Agent is the principal the dispatches built here name: the one the
// peer's consents name unless a test says otherwise (Peer.Principal).
const Agent = "uid:1000"

// InvokeDispatch is the dispatch of an invoke of operation op with
// arguments args, in conversation c1, request r-ATTEMPT, by Agent.
func InvokeDispatch(t testing.TB, attempt, op, args string) msg.Dispatch {
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{Arguments: json.RawMessage(args), ConversationID: "c1", OperationID: op, RequestID: "r-" + attempt})
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path, Body: req.Body, Agent: Agent}
}

// ListDispatch is the dispatch of a listing from its start.
func ListDispatch(t testing.TB, attempt string) msg.Dispatch {
	req, err := oracleops.BuildList("/v1", oracleops.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path, Agent: Agent}
}

// DescribeDispatch is the dispatch of a describe of operation op.
func DescribeDispatch(t testing.TB, attempt, op string) msg.Dispatch {
	req, err := oracleops.BuildDescribe("/v1", op)
	if err != nil {
		t.Fatal(err)
	}
	return msg.Dispatch{Attempt: attempt, Method: req.Method, Path: req.Path, Agent: Agent}
}

// Call sends d on cl and returns the host's answer; a refused frame is
// returned as a refused result.
func Call(t testing.TB, cl *wire.Client, d msg.Dispatch) msg.DispatchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeDispatch, d)
	if err != nil {
		t.Fatalf("dispatch %s: %v", d.Attempt, err)
	}
	if env.T == msg.TypeRefused {
		var r msg.Refusal
		env.Decode(&r)
		return msg.DispatchResult{Attempt: d.Attempt, Outcome: msg.StateRefused, Refusal: &r}
	}
	var res msg.DispatchResult
	if err := env.Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// Inspect asks the host on cl what it recorded of attempt id.
func Inspect(t testing.TB, cl *wire.Client, id string) msg.InspectResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeInspect, msg.Inspect{Attempt: id})
	if err != nil {
		t.Fatal(err)
	}
	var res msg.InspectResult
	if err := env.Decode(&res); err != nil {
		t.Fatalf("inspect %s: %s: %v", id, env.T, err)
	}
	return res
}

// WantRefusal fails unless res is a refusal with code whose reason holds
// reasonPart and names none of the operator's internals (WantNoInternals).
func WantRefusal(t testing.TB, res msg.DispatchResult, code, reasonPart string) {
	t.Helper()
	if res.Outcome != msg.StateRefused || res.Refusal == nil {
		t.Fatalf("want refusal %s, got outcome %s status %d %s (%s)", code, res.Outcome, res.Status, res.Body, res.Detail)
	}
	if res.Refusal.Code != code || !strings.Contains(res.Refusal.Reason, reasonPart) {
		t.Fatalf("want refusal %s containing %q, got %s: %s", code, reasonPart, res.Refusal.Code, res.Refusal.Reason)
	}
	WantNoInternals(t, res.Refusal.Reason)
}

// WantExactRefusal fails unless res is a refusal with code and exactly
// reason, naming none of the operator's internals.
func WantExactRefusal(t testing.TB, res msg.DispatchResult, code, reason string) {
	t.Helper()
	if res.Outcome != msg.StateRefused || res.Refusal == nil {
		t.Fatalf("want refusal %s, got outcome %s status %d %s (%s)", code, res.Outcome, res.Status, res.Body, res.Detail)
	}
	if res.Refusal.Code != code || res.Refusal.Reason != reason {
		t.Fatalf("want refusal %s: %q\ngot %s: %q", code, reason, res.Refusal.Code, res.Refusal.Reason)
	}
	WantNoInternals(t, res.Refusal.Reason)
}

// WantNoInternals fails when a text that reaches the agent names the
// operator's internals the world uses: the controller's name (ctl), a
// grant id (g-...), a socket path (under the temp dir) or a time window.
func WantNoInternals(t testing.TB, text string) {
	t.Helper()
	for _, bad := range []string{"ctl", "g-", os.TempDir(), ".sock", "valid "} {
		if strings.Contains(text, bad) {
			t.Fatalf("%q reaches the agent and carries %q", text, bad)
		}
	}
}

// Ctx is a context for one test step: 20 s.
func Ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// RequestSHA256 is the hash the controller journals for d's request.
func RequestSHA256(d msg.Dispatch) []byte {
	sum := oracleops.Request{Method: d.Method, Path: d.Path, Body: d.Body}.SHA256()
	return sum[:]
}
