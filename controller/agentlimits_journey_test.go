package controller

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// TestAgentLimitsEndToEnd: two real agent accounts through the real
// controller and host, the operator's limits set with the shipped
// steward-operator command while the host runs. alpha may make one call a
// day: its second is refused naming the limit and when it refills, with
// nothing journaled by the host and nothing charged, while beta, without
// limits, goes on; alpha's overview says it has no calls left; a restart
// of the host refills nothing; and receipts verify groups the receipts by
// the agent each names.
func TestAgentLimitsEndToEnd(t *testing.T) {
	s, alpha, beta, _, gid := twoAgentStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if code, out := s.operatorCmd("agent", "set", "alpha", "--controller", s.cfg.Name, "--calls-per-day", "1"); code != 0 {
		t.Fatalf("agent set: exit %d: %s", code, out)
	}

	ca := s.agentClient(ctx, alpha.UID, alpha.GID, gid)
	cb := s.agentClient(ctx, beta.UID, beta.GID, gid)
	if r, res := call(t, ctx, ca, ToolCall, callArgs("a1", map[string]any{"text": "one"})); res.IsError || r.Status != 200 {
		t.Fatalf("alpha's first call: %+v", r)
	}
	refusedSecond := func(when string) {
		t.Helper()
		before, seq := s.purse(), s.hostCallRecords()
		r, res := call(t, ctx, ca, ToolCall, callArgs("a2-"+when, map[string]any{"text": "two"}))
		if !res.IsError || r.Refusal == nil || r.Refusal.Code != msg.CodeAgentLimit ||
			!strings.HasPrefix(r.Refusal.Reason, "the daily call limit for this agent is reached: it refills at ") {
			t.Fatalf("%s: alpha's second call: %+v %+v", when, r, r.Refusal)
		}
		if p := s.purse(); p.Balance != before.Balance {
			t.Fatalf("%s: the refused call was charged: %d -> %d", when, before.Balance, p.Balance)
		}
		if got := s.hostCallRecords(); got != seq {
			t.Fatalf("%s: the host journaled %d records for a call refused at admission", when, got-seq)
		}
	}
	refusedSecond("running")
	for i, id := range []string{"b1", "b2"} {
		if r, res := call(t, ctx, cb, ToolCall, callArgs(id, map[string]any{"text": "beta"})); res.IsError || r.Status != 200 {
			t.Fatalf("beta's call %d: %+v", i+1, r)
		}
	}
	var ov Overview
	_, res := call(t, ctx, ca, ToolOverview, map[string]any{})
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &ov)
	if !ov.Limits.Reported || !ov.Limits.Limited || ov.Limits.CallsLeft == nil || *ov.Limits.CallsLeft != 0 {
		t.Fatalf("alpha's overview: %+v", ov.Limits)
	}

	s.restartHost()
	refusedSecond("after-restart")

	got := s.receiptsByAgent()
	if got["alpha"] != 1 || got["beta"] != 2 {
		t.Fatalf("receipts by agent: %+v, want alpha 1 and beta 2", got)
	}
}

// receiptsByAgent is how many receipts the host's chain holds for each
// agent, as the shipped receipts verify counts them.
func (s *stack) receiptsByAgent() map[string]int {
	s.t.Helper()
	code, out := s.operatorCmd("receipts", "verify", "--json")
	var rep struct {
		Agents []struct {
			Agent    string `json:"agent"`
			Receipts int    `json:"receipts"`
		} `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		s.t.Fatalf("receipts verify: exit %d, %v: %s", code, err, out)
	}
	got := map[string]int{}
	for _, a := range rep.Agents {
		got[a.Agent] = a.Receipts
	}
	return got
}

// hostCallRecords counts the host journal's records, read-only, but for
// its checkpoints: the host signs its receipt chain's head once a second,
// whatever the calls do, so a checkpoint is no record of a call.
func (s *stack) hostCallRecords() int {
	s.t.Helper()
	j, err := journal.Open(filepath.Join(s.store, "journal"), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	n := 0
	if err := j.Iterate(1, func(r journal.Record) error {
		if r.Kind != hostlog.KindCheckpoint {
			n++
		}
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
	return n
}
