package controller

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestNotSeenAfterConsentStaysUncertain: the controller's journal says it
// consented to attempt a1 (its uncertain result records what was
// consented), and the host answers inspect that it never saw a1, as the
// attacker's host did. `attempts resolve` refuses to abandon it, in one
// line, journaling nothing: a1 stays uncertain, so its requestId is never
// consented again. An uncertain attempt with no consent known (a2) is
// abandoned as before. A stand-in host that says consented a3 was refused,
// with no receipt, is refused alike.
func TestNotSeenAfterConsentStaysUncertain(t *testing.T) {
	s := newStack(t, stackOpts{price: 3, funded: 100})
	raw, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(s.cfg, raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	sha := make([]byte, 32)
	for _, id := range []string{"a1", "a2", "a3"} {
		b := ledger.Begin{Attempt: id, Tool: ToolCall, Application: "appliance", Operation: "echo", RequestID: "r-" + id, RequestSHA256: sha,
			Kind: msg.KindInvoke, Agent: "uid:1000", Principal: "uid:1000"}
		res := ledger.Result{Attempt: id, Outcome: msg.StateUncertain, Detail: "the channel to the host failed after the dispatch was sent"}
		if id != "a2" {
			res.Consented = 3
		}
		if _, err := j.Append(ledger.KindBegin, b); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ledger.KindResult, res); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seq := s.lastSeq()
	_, err = ResolveAttempt(ctx, s.cfgPath, "a1", nil)
	want := "attempt not resolvable: attempt a1: the host says it has not seen it, but this controller consented to its reserve; it stays uncertain until the host's operator resolves it (steward-operator attempts resolve a1 --redeliver|--release|--charge --reason TEXT)"
	if !errors.Is(err, ErrNotResolvable) || err.Error() != want {
		t.Fatalf("resolve a1: %v\nwant %s", err, want)
	}
	if s.lastSeq() != seq {
		t.Fatalf("the refused resolve journaled %d records", s.lastSeq()-seq)
	}
	ins, err := ResolveAttempt(ctx, s.cfgPath, "a2", nil)
	if err != nil || ins.Resolved != msg.StateAbandoned {
		t.Fatalf("resolve a2: %+v %v", ins, err)
	}

	// A host that says a3 was refused, with no receipt to show for it.
	frameHost(t, s, func(req *wire.Envelope) (string, any) {
		return msg.TypeInspectResult, msg.InspectResult{Attempt: "a3", State: msg.StateRefused}
	})
	seq = s.lastSeq()
	_, err = ResolveAttempt(ctx, s.cfgPath, "a3", nil)
	want = "attempt not resolvable: attempt a3: the host says it is refused, with no receipt, but this controller consented to its reserve; it stays uncertain until the host's operator resolves it (steward-operator attempts resolve a3 --redeliver|--release|--charge --reason TEXT)"
	if !errors.Is(err, ErrNotResolvable) || err.Error() != want || s.lastSeq() != seq {
		t.Fatalf("resolve a3: %v\nwant %s", err, want)
	}
	list, err := ListAttempts(s.cfgPath)
	if err != nil || len(list) != 2 || list[0].ID != "a1" || list[1].ID != "a3" || list[0].State != msg.StateUncertain {
		t.Fatalf("attempts list: %+v %v", list, err)
	}
}
