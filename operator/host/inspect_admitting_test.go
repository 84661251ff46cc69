package host_test

import (
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/wire/msg"
)

// TestInspectWhileAdmitted does what the attacker's controller-side view
// needed: it inspects an attempt while the host holds its reservation and
// the payer's consent is on its way (the peer has signed it and not yet
// answered). The host answers pending with its one line, never not-seen,
// so no controller abandons an attempt whose consent the host may hold;
// once it ends, inspect shows its end. An attempt the host never saw is
// still not-seen.
func TestInspectWhileAdmitted(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 2})
	entered, release := make(chan struct{}), make(chan struct{})
	hook := func() { close(entered); <-release }
	w.Peer.BeforeConsent.Store(&hook)
	w.Serve(t)
	cl := w.Dial(t)
	first := make(chan msg.DispatchResult, 1)
	go func() {
		first <- peertest.Call(t, cl, peertest.InvokeDispatch(t, "c1", "calc.evaluate", `{"expression":"1+1"}`))
	}()
	<-entered
	w.Peer.BeforeConsent.Store(nil)
	other := w.Dial(t)
	ir := peertest.Inspect(t, other, "c1")
	const want = "being admitted: the host holds its reservation and waits for, or holds, the payer's consent"
	if ir.State != msg.StatePending || ir.Detail != want || ir.Receipt != nil {
		t.Fatalf("inspect while admitted: %+v, want pending %q", ir, want)
	}
	if ir := peertest.Inspect(t, other, "never"); ir.State != msg.StateNotSeen {
		t.Fatalf("inspect of an attempt never dispatched: %+v", ir)
	}
	close(release)
	hosttest.WantAnswer(t, <-first)
	if ir := peertest.Inspect(t, other, "c1"); ir.State != msg.StateDefinite || ir.Receipt == nil {
		t.Fatalf("inspect once answered: %+v", ir)
	}
}
