package controller

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// TestCrashAfterReply kills the controller after a definite answer went
// back to the agent and before its result record was journaled (the
// record is off the serial path, resultwrite.go): the restarted controller
// finds the attempt uncertain, and a call again with the same requestId
// asks the host and replays the very answer and receipt the agent already
// holds, journaling one resolution, charging nothing more.
func TestCrashAfterReply(t *testing.T) {
	s := newStack(t, stackOpts{price: 7, funded: 100})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	child := s.startChild("STEWARD_FAILPOINT=" + FailAfterReply)
	cs := s.client(ctx)
	args := callArgs("reply-1", map[string]any{"text": "once"})
	first, res := call(t, ctx, cs, ToolCall, args)
	if res.IsError || first.Outcome != msg.StateDefinite || first.ReceiptID == "" {
		t.Fatalf("first call: %+v", first)
	}
	// The answer is out; its result record is held at the failpoint.
	child.cmd.Process.Kill()
	<-child.done

	s.startController()
	list, err := ListAttempts(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != first.AttemptID || list[0].State != msg.StateUncertain {
		t.Fatalf("attempts list after the crash: %+v", list)
	}
	seq := s.lastSeq()
	again, res := call(t, ctx, s.client(ctx), ToolCall, args)
	if res.IsError || !again.Replayed || again.AttemptID != first.AttemptID || again.ReceiptID != first.ReceiptID ||
		again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay after the crash: %+v, want the first answer %+v", again, first)
	}
	if again.Charge == nil || *again.Charge != 0 {
		t.Fatalf("replay charge %v, want 0", again.Charge)
	}
	if n := s.lastSeq() - seq; n != 1 {
		t.Fatalf("the replay journaled %d records, want its resolution alone", n)
	}
	if list, _ := ListAttempts(s.cfgPath); len(list) != 0 {
		t.Fatalf("still uncertain: %+v", list)
	}
	if p := s.purse(); p.Balance != s.funded-s.price {
		t.Fatalf("purse balance %d, want %d (one charge)", p.Balance, s.funded-s.price)
	}
}
