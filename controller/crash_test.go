package controller

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/wire/msg"
)

// TestCrashFailpoints kills the controller process (SIGKILL at a named
// failpoint) after begin, after consent and after the host answered, then
// restarts it: the attempt is listed uncertain, inspection shows the
// host's true state, a new call with the same requestId learns an answer
// the host recorded (and is refused while the host has not seen the
// attempt, until it is resolved), and resolving it never dispatches or
// charges twice.
func TestCrashFailpoints(t *testing.T) {
	cases := []struct {
		failpoint string
		hostState msg.State // what the host reports once it has settled
		resolved  msg.State
	}{
		{FailAfterBegin, msg.StateNotSeen, msg.StateAbandoned},
		{FailAfterConsent, msg.StateDefinite, msg.StateDefinite},
		{FailAfterAnswer, msg.StateDefinite, msg.StateDefinite},
	}
	for _, tc := range cases {
		t.Run(tc.failpoint, func(t *testing.T) {
			s := newStack(t, stackOpts{price: 7, funded: 100})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			child := s.startChild("STEWARD_FAILPOINT=" + tc.failpoint)
			cs := s.client(ctx)
			args := callArgs("crash-1", map[string]any{"text": "once"})
			callErr := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: args})
				callErr <- err
			}()
			select {
			case err := <-child.done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("controller exit: %v, want SIGKILL at %s", err, tc.failpoint)
				}
			case <-ctx.Done():
				t.Fatal("the controller did not reach the failpoint")
			}
			if err := <-callErr; err == nil {
				t.Fatal("the call answered although the controller died")
			}

			// The host finishes on its own what it was given (a consented
			// delivery is completed although the controller died); its
			// shutdown drains that work, so after a restart its answer to
			// inspect is final.
			s.restartHost()
			s.startController()
			list, err := ListAttempts(s.cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].RequestID != "crash-1" || list[0].State != msg.StateUncertain {
				t.Fatalf("attempts list: %+v", list)
			}
			id := list[0].ID

			ins, err := InspectAttempt(ctx, s.cfgPath, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ins.HostState != tc.hostState {
				t.Fatalf("host state %s (%s), want %s", ins.HostState, ins.Detail, tc.hostState)
			}

			// A new call with the same requestId asks the host: an answer
			// the host recorded resolves the attempt (journaled) and is
			// replayed; an attempt the host has not seen is refused until
			// the controller's attempts resolve abandons it.
			cs2 := s.client(ctx)
			seq := s.lastSeq()
			r, res := call(t, ctx, cs2, ToolCall, args)
			if tc.hostState == msg.StateNotSeen {
				if !res.IsError || r.Refusal == nil || r.Refusal.Code != msg.CodeUncertain {
					t.Fatalf("same requestId while uncertain: %+v", r)
				}
				if s.lastSeq() != seq {
					t.Fatal("the refused call journaled something")
				}
				ins, err = ResolveAttempt(ctx, s.cfgPath, id, nil)
				if err != nil || ins.Resolved != tc.resolved {
					t.Fatalf("resolve: %v %+v", err, ins)
				}
			} else {
				if res.IsError || !r.Replayed || r.AttemptID != id || r.ReceiptID != ins.ReceiptID {
					t.Fatalf("same requestId once the host has the answer: %+v", r)
				}
				if s.lastSeq() != seq+1 {
					t.Fatalf("the call learning the host's answer journaled %d records, want its resolution", s.lastSeq()-seq)
				}
			}
			if list, _ := ListAttempts(s.cfgPath); len(list) != 0 {
				t.Fatalf("still uncertain after resolve: %+v", list)
			}

			r, res = call(t, ctx, cs2, ToolCall, args)
			if res.IsError || r.Outcome != msg.StateDefinite {
				t.Fatalf("after resolve: %+v", r)
			}
			switch tc.resolved {
			case msg.StateDefinite:
				if !r.Replayed || r.AttemptID != id || r.ReceiptID != ins.ReceiptID {
					t.Fatalf("want the host's answer replayed: %+v (receipt %s)", r, ins.ReceiptID)
				}
			case msg.StateAbandoned:
				if r.Replayed || r.AttemptID == id {
					t.Fatalf("want a new attempt: %+v", r)
				}
			}
			// Charged exactly once in every case.
			if p := s.purse(); p.Balance != s.funded-s.price {
				t.Fatalf("purse balance %d, want %d (one charge)", p.Balance, s.funded-s.price)
			}
		})
	}
}
