package host_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestCrashAtEndFailpoints kills the host (SIGKILL) just after each
// record that ends an attempt with a receipt is durable, before the
// dispatch is answered: a 4xx settled at the refusal price, a release
// before sending, a payer's refusal. After the restart the attempt is in
// the state its record says, with that receipt; nothing was delivered
// twice, nothing charged twice or left held, and verify agrees.
func TestCrashAtEndFailpoints(t *testing.T) {
	cases := []struct {
		name      string
		fp        string
		opts      hosttest.Opts
		args      string
		refuse    bool // the payer refuses consent
		state     msg.State
		delivered int64
		charged   uint64 // what the purse is charged after the restart
		receipt   func(t *testing.T, r msg.Receipt, in msg.InspectResult)
	}{
		{"a 4xx at the refusal price", operator.FailAfterOutcome, hosttest.Opts{Fund: 100, Price: 5, RefusalPrice: 2}, `{"expression":"1/0"}`, false,
			msg.StateDefinite, 1, 2, func(t *testing.T, r msg.Receipt, in msg.InspectResult) {
				if in.Status != 422 || r.Status != 422 || r.Charge != 2 || r.PriceApplied != msg.PriceRefusal || r.BalanceAfter != 98 {
					t.Fatalf("receipt %+v, inspect status %d", r, in.Status)
				}
			}},
		{"not sent", operator.FailAfterNotSent, hosttest.Opts{Fund: 100, Price: 5, NoApp: true}, `{"expression":"1+1"}`, false,
			msg.StateNotSent, 0, 0, func(t *testing.T, r msg.Receipt, _ msg.InspectResult) {
				if r.Outcome != msg.StateNotSent || r.Charge != 0 || r.BalanceAfter != 100 || r.Reason != "the application could not be reached" || r.Consent == nil {
					t.Fatalf("receipt %+v", r)
				}
			}},
		{"the payer refused", operator.FailAfterRefused, hosttest.Opts{Fund: 100, Price: 5}, `{"expression":"1+1"}`, true,
			msg.StateRefused, 0, 0, func(t *testing.T, r msg.Receipt, _ msg.InspectResult) {
				if r.Outcome != msg.StateRefused || r.Charge != 0 || r.BalanceAfter != 100 || r.Reason != "the payer refused: no-consent: not journaled" || r.Consent != nil {
					t.Fatalf("receipt %+v", r)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := hosttest.NewWorld(t, tc.opts)
			w.Peer.RefuseReserve.Store(tc.refuse)
			c := hosttest.StartChild(t, w.Store, tc.fp)
			cl := w.Dial(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := cl.Call(ctx, msg.TypeDispatch, peertest.InvokeDispatch(t, "a1", "calc.evaluate", tc.args))
			cancel()
			if err == nil {
				t.Fatal("the dispatch was answered; the host should have died")
			}
			if ws := c.WaitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child exit %v, want SIGKILL at %s; stderr: %s", ws, tc.fp, c.Stderr.String())
			}
			delivered := func() int64 {
				if w.App == nil {
					return 0
				}
				return w.App.Calls.Load()
			}
			if got := delivered(); got != tc.delivered {
				t.Fatalf("the application saw %d requests, want %d", got, tc.delivered)
			}
			reserves := w.Peer.Reserves.Load()
			c = hosttest.StartChild(t, w.Store, "")
			cl = w.Dial(t)
			in := peertest.Inspect(t, cl, "a1")
			if in.State != tc.state {
				t.Fatalf("after %s: state %s (%s), want %s", tc.fp, in.State, in.Detail, tc.state)
			}
			r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
			if err != nil {
				t.Fatalf("receipt after the restart: %v", err)
			}
			tc.receipt(t, r, in)
			// never dispatched again, nothing retried or asked again
			peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", tc.args)), msg.CodeDuplicate, "never delivered twice")
			if got := delivered(); got != tc.delivered || w.Peer.Reserves.Load() != reserves {
				t.Fatalf("after restart: %d deliveries (want %d), %d reserves (want %d)", got, tc.delivered, w.Peer.Reserves.Load(), reserves)
			}
			c.Stop(t)
			w.WithStore(t, func(s *operator.Store) {
				p, _ := s.PurseShow("ctl")
				if p.Charged != tc.charged || p.Balance != 100-tc.charged || p.Holds != 0 {
					t.Fatalf("purse %+v: want %d charged once, nothing held", p, tc.charged)
				}
				rep, err := audit.VerifyStore(w.Store)
				if err != nil || rep.Receipts != 1 || rep.Purses[0].Charged != tc.charged {
					t.Fatalf("verify: %+v %v", rep, err)
				}
			})
		})
	}
}
