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
// consented to attempts a1 and a3 (their uncertain results record what
// was consented). A stand-in host that says a3 was refused, with no
// receipt, as the attacker's host did, is refused in one line, journaling
// nothing: a3 stays uncertain, so its requestId is never consented again.
// The real host, which answers pending for an attempt it holds a consent
// for, has never seen a1: that not-seen is its word that no consent of a1
// is held, after a restart too (a host killed between the consent and its
// reserve record), so a1 is abandoned, as a2 with no consent known is.
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
	if ins, err := ResolveAttempt(ctx, s.cfgPath, "a1", nil); err != nil || ins.Resolved != msg.StateAbandoned {
		t.Fatalf("resolve a1: %+v %v", ins, err)
	}
	ins, err := ResolveAttempt(ctx, s.cfgPath, "a2", nil)
	if err != nil || ins.Resolved != msg.StateAbandoned {
		t.Fatalf("resolve a2: %+v %v", ins, err)
	}

	// A host that says a3 was refused, with no receipt to show for it.
	frameHost(t, s, func(req *wire.Envelope) (string, any) {
		return msg.TypeInspectResult, msg.InspectResult{Attempt: "a3", State: msg.StateRefused}
	})
	seq := s.lastSeq()
	_, err = ResolveAttempt(ctx, s.cfgPath, "a3", nil)
	want := "attempt not resolvable: attempt a3: the host says it is refused, with no receipt, but this controller consented to its reserve; it stays uncertain until the host's operator resolves it (steward-operator attempts resolve a3 --redeliver|--release|--charge --reason TEXT)"
	if !errors.Is(err, ErrNotResolvable) || err.Error() != want || s.lastSeq() != seq {
		t.Fatalf("resolve a3: %v\nwant %s", err, want)
	}
	list, err := ListAttempts(s.cfgPath)
	if err != nil || len(list) != 1 || list[0].ID != "a3" || list[0].State != msg.StateUncertain {
		t.Fatalf("attempts list: %+v %v", list, err)
	}
}
