package host_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// hangUpApp serves path with an application that reads each request and
// hangs up without answering: a delivery there is sent and never
// answered, so the attempt is uncertain. Its close removes the socket.
func hangUpApp(t *testing.T, path string) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 4096))
			c.Close()
		}
	}()
	return func() { l.Close(); <-done }
}

// uncertainWorld is a world serving in-process whose attempt u1 (an
// invoke charged price) is uncertain: sent, never answered. The real
// application is back on the upstream socket when it returns, and has seen
// nothing.
func uncertainWorld(t *testing.T, price uint64) *hosttest.World {
	t.Helper()
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: price, NoApp: true})
	hangUp := hangUpApp(t, w.Route.Upstream)
	w.Serve(t)
	res := peertest.Call(t, w.Dial(t), peertest.InvokeDispatch(t, "u1", "calc.evaluate", `{"expression":"6*7"}`))
	if res.Outcome != msg.StateUncertain {
		t.Fatalf("dispatch: %s %s; want uncertain", res.Outcome, res.Detail)
	}
	hangUp()
	w.App = peertest.StartApp(t, w.Dir)
	return w
}

// resolveJSON resolves attempt id through the CLI and decodes its answer.
func resolveJSON(t *testing.T, store, id, action, reason string) views.AttemptView {
	t.Helper()
	code, out, errs := hosttest.RunCLI("attempts", "resolve", id, "--"+action, "--reason", reason, "--store", store, "--json")
	if code != cli.ExitOK {
		t.Fatalf("resolve --%s: exit %d: %s", action, code, errs)
	}
	var v views.AttemptView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("resolve output %q: %v", out, err)
	}
	return v
}

// checkResolved checks what the host answers inspect for a resolved
// attempt, its receipt, the purse, that the journal verifies and that a
// restart replays the same state.
func checkResolved(t *testing.T, w *hosttest.World, want msg.State, charge uint64, reason string) {
	t.Helper()
	in := peertest.Inspect(t, w.Dial(t), "u1")
	if in.State != want || in.Receipt == nil {
		t.Fatalf("inspect: %s (%s), receipt %d bytes; want %s with a receipt", in.State, in.Detail, len(in.Receipt), want)
	}
	rc, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	// Every resolution's receipt names its resolver: a redelivery's answer
	// the redeliver record's, a release or charge the resolve record's.
	uid := fmt.Sprintf("uid:%d", os.Geteuid())
	if rc.V != msg.ReceiptV2 || rc.Attempt != "u1" || rc.Charge != charge || rc.BalanceAfter != 100-charge || rc.ResolvedBy != uid || !strings.Contains(rc.Reason, reason) {
		t.Fatalf("receipt %+v; want charge %d, balance %d, resolved by %s, reason %q", rc, charge, 100-charge, uid, reason)
	}
	if want != msg.StateDefinite && (rc.Outcome != want || rc.Consent == nil) {
		t.Fatalf("receipt outcome %s, consent %d bytes; want %s with the reserved consent", rc.Outcome, len(rc.Consent), want)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		p, _ := s.PurseShow("ctl")
		if p.Charged != charge || p.Balance != 100-charge {
			t.Fatalf("purse after restart %+v; want charged %d", p, charge)
		}
		v, err := s.AttemptInspect("u1")
		if err != nil || v.State != want || v.ReceiptID == "" || *v.Charged != charge {
			t.Fatalf("after restart: %+v %v", v, err)
		}
		rep, err := audit.VerifyStore(w.Store)
		if err != nil || rep.Receipts != 1 || len(rep.Findings) != 0 {
			t.Fatalf("verify: %+v %v", rep, err)
		}
		if rep.Purses[0].Balance != int64(100-charge) {
			t.Fatalf("verify's purse %+v; want balance %d", rep.Purses[0], 100-charge)
		}
	})
}

// TestResolveRelease: --release ends an uncertain attempt released, with
// charge 0 and the operator's reason (200 bytes, the bound) in its
// receipt; the reservation goes back to the purse, once.
func TestResolveRelease(t *testing.T) {
	w := uncertainWorld(t, 5)
	reason := strings.Repeat("r", views.MaxResolveReason)
	v := resolveJSON(t, w.Store, "u1", "release", reason)
	if v.State != msg.StateReleased || *v.Charged != 0 || v.Outcome != msg.StateReleased || v.Reason != reason {
		t.Fatalf("resolve answered %+v", v)
	}
	if !strings.Contains(v.Detail, "released by the operator (uid:") {
		t.Fatalf("detail %q", v.Detail)
	}
	checkResolved(t, w, msg.StateReleased, 0, reason)
	if n := w.App.Calls.Load(); n != 0 {
		t.Fatalf("a release sent %d requests", n)
	}
}

// TestResolveCharge: --charge settles the reservation: the receipt says
// no response was recorded, with the reason, and charges it once.
func TestResolveCharge(t *testing.T) {
	w := uncertainWorld(t, 5)
	v := resolveJSON(t, w.Store, "u1", "charge", "the ledger of the application shows it ran")
	if v.State != msg.StatePerformed || *v.Charged != 5 || !strings.HasPrefix(v.Reason, "no response was recorded; the operator states it was performed: the ledger") {
		t.Fatalf("resolve answered %+v", v)
	}
	checkResolved(t, w, msg.StatePerformed, 5, "the ledger of the application shows it ran")
}

// TestResolveRedeliver: --redeliver sends the kept request once, under
// the same attempt: the application answers, the outcome is definite with
// an ordinary receipt, charged once; a second resolution is refused.
func TestResolveRedeliver(t *testing.T) {
	w := uncertainWorld(t, 5)
	// while the host runs, list goes through its admin socket
	code, out, errs := hosttest.RunCLI("attempts", "list", "--store", w.Store)
	if code != 0 || !strings.HasPrefix(out, "u1\tuncertain\tcontroller ctl\treserved 5\t") {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	v := resolveJSON(t, w.Store, "u1", "redeliver", "the application was restarted")
	if v.State != msg.StateDefinite || v.Status != 200 || !strings.Contains(v.BodyText, "42") || *v.Charged != 5 {
		t.Fatalf("resolve answered %+v", v)
	}
	if v.Detail != fmt.Sprintf("redelivered by uid:%d: the application was restarted", os.Geteuid()) {
		t.Fatalf("detail %q", v.Detail)
	}
	if n := w.App.Calls.Load(); n != 1 {
		t.Fatalf("the application saw %d requests, want 1", n)
	}
	code, _, errs = hosttest.RunCLI("attempts", "resolve", "u1", "--redeliver", "--reason", "again", "--store", w.Store)
	if code != cli.ExitRefused || !strings.Contains(errs, "attempt u1 is definite, not uncertain; only an uncertain attempt can be resolved") {
		t.Fatalf("second resolve: %d %q", code, errs)
	}
	in := peertest.Inspect(t, w.Dial(t), "u1")
	if in.Detail != v.Detail || in.Status != 200 {
		t.Fatalf("inspect after redelivery: %+v", in)
	}
	checkResolved(t, w, msg.StateDefinite, 5, "")
	if n := w.App.Calls.Load(); n != 1 {
		t.Fatalf("the application saw %d requests, want 1", n)
	}
}

// TestRedeliverFailureStaysUncertain: a redelivery that cannot reach the
// application leaves the attempt uncertain with its reservation (exit 1);
// each command journals one redeliver record; the next one succeeds.
func TestRedeliverFailureStaysUncertain(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5, NoApp: true})
	hangUp := hangUpApp(t, w.Route.Upstream)
	w.Serve(t)
	if res := peertest.Call(t, w.Dial(t), peertest.InvokeDispatch(t, "u1", "calc.evaluate", `{"expression":"6*7"}`)); res.Outcome != msg.StateUncertain {
		t.Fatalf("dispatch: %+v", res)
	}
	hangUp()
	code, _, errs := hosttest.RunCLI("attempts", "resolve", "u1", "--redeliver", "--reason", "try", "--store", w.Store)
	if code != cli.ExitFailure || !strings.Contains(errs, "attempt u1: the redelivery failed (the application could not be reached, nothing was sent this time); it stays uncertain and keeps its reservation") {
		t.Fatalf("failed redelivery: %d %q", code, errs)
	}
	in := peertest.Inspect(t, w.Dial(t), "u1")
	if in.State != msg.StateUncertain || !strings.Contains(in.Detail, "the operator's redelivery failed") {
		t.Fatalf("after a failed redelivery: %+v", in)
	}
	w.App = peertest.StartApp(t, w.Dir)
	if v := resolveJSON(t, w.Store, "u1", "redeliver", "the application is back"); v.State != msg.StateDefinite {
		t.Fatalf("second redelivery: %+v", v)
	}
	w.Stop()
	if n := countKind(t, w.Store, hostlog.KindRedeliver); n != 2 {
		t.Fatalf("%d redeliver records, want one per command (2)", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Charged != 5 {
			t.Fatalf("purse %+v, want charged once", p)
		}
		if _, err := audit.VerifyStore(w.Store); err != nil {
			t.Fatal(err)
		}
	})
}

// countKind counts the host journal's records of kind.
func countKind(t *testing.T, store, kind string) int {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	n := 0
	if err := j.Iterate(1, func(r journal.Record) error {
		if r.Kind == kind {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestResolveRefusals: every refusal of a resolution is exit 2 with its
// reason, and journals nothing.
func TestResolveRefusals(t *testing.T) {
	w := uncertainWorld(t, 5)
	peertest.Call(t, w.Dial(t), peertest.InvokeDispatch(t, "d1", "calc.evaluate", `{"expression":"1+1"}`))
	w.Stop()
	before := countKind(t, w.Store, hostlog.KindResolve) + countKind(t, w.Store, hostlog.KindRedeliver)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no reason", []string{"u1", "--release"}, cli.ExitRefused, "resolve: --reason is required"},
		{"reason one past the bound", []string{"u1", "--release", "--reason", strings.Repeat("r", views.MaxResolveReason+1)}, cli.ExitRefused, "resolve: --reason of 201 bytes: the bound is 200"},
		{"two lines", []string{"u1", "--release", "--reason", "a\nb"}, cli.ExitRefused, "resolve: --reason must be one line with no control characters"},
		{"no action", []string{"u1", "--reason", "x"}, cli.ExitRefused, "exactly one of --redeliver, --release and --charge is required"},
		{"two actions", []string{"u1", "--release", "--charge", "--reason", "x"}, cli.ExitRefused, "exactly one of --redeliver, --release and --charge is required"},
		{"unknown attempt", []string{"nope", "--release", "--reason", "x"}, cli.ExitRefused, "attempt nope: the host has no reservation for it; there is nothing to resolve"},
		{"definite", []string{"d1", "--charge", "--reason", "x"}, cli.ExitRefused, "attempt d1 is definite, not uncertain; only an uncertain attempt can be resolved"},
		{"redeliver without the host", []string{"u1", "--redeliver", "--reason", "x"}, cli.ExitRefused, "attempt u1: --redeliver is done by the running host, which delivers to the application: start steward-operator serve and run the command again"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := hosttest.RunCLI(append([]string{"attempts", "resolve", "--store", w.Store}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d %q; want %d with %q", code, errs, tc.code, tc.want)
			}
		})
	}
	if after := countKind(t, w.Store, hostlog.KindResolve) + countKind(t, w.Store, hostlog.KindRedeliver); after != before {
		t.Fatalf("refused resolutions journaled %d records", after-before)
	}
	// list and inspect read the journal while no host runs
	code, out, errs := hosttest.RunCLI("attempts", "list", "--state", "uncertain", "--store", w.Store, "--json")
	var list []views.AttemptView
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Attempt != "u1" || list[0].Reserved != 5 {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	if code, _, errs := hosttest.RunCLI("attempts", "list", "--state", "lost", "--store", w.Store); code != cli.ExitRefused || !strings.Contains(errs, `--state "lost": the host's attempt states are`) {
		t.Fatalf("list --state lost: %d %q", code, errs)
	}
	code, out, _ = hosttest.RunCLI("attempts", "inspect", "u1", "--store", w.Store)
	if code != 0 || !strings.Contains(out, "attempt u1: uncertain") || !strings.Contains(out, "application app, invoke calc.evaluate, reserved 5, redeliverable true") {
		t.Fatalf("inspect: %d %q", code, out)
	}
	// with no host, a release runs on the store directly
	if v := resolveJSON(t, w.Store, "u1", "release", "never reached the application"); v.State != msg.StateReleased {
		t.Fatalf("direct release: %+v", v)
	}
	w.WithStore(t, func(s *operator.Store) {
		if _, err := audit.VerifyStore(w.Store); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFirstVersionReserveNotRedeliverable: an attempt reserved by a
// first-version reserve record (no request bytes) is refused a
// redelivery, saying why, and can still be charged.
func TestFirstVersionReserveNotRedeliverable(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
	d := peertest.InvokeDispatch(t, "old1", "calc.evaluate", `{"expression":"1+1"}`)
	rec := hostlog.Reserve{Attempt: "old1", Controller: "ctl", Grant: w.Grant, Application: "app", Operation: "calc.evaluate",
		Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), Charge: 0, Day: utcDay(time.Now()), Ledger: hosttest.NextLedger(t, w.Store)}
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindReserve, rec)
	w.Serve(t)
	code, _, errs := hosttest.RunCLI("attempts", "resolve", "old1", "--redeliver", "--reason", "x", "--store", w.Store)
	if code != cli.ExitRefused || !strings.Contains(errs, "attempt old1 was reserved by a host that did not keep request bytes (a first-version reserve record): it can be released or charged (--release, --charge), not redelivered") {
		t.Fatalf("redeliver: %d %q", code, errs)
	}
	if v := resolveJSON(t, w.Store, "old1", "charge", "it ran"); v.State != msg.StatePerformed || v.Redeliverable {
		t.Fatalf("charge: %+v", v)
	}
	if n := w.App.Calls.Load(); n != 0 {
		t.Fatalf("the application saw %d requests", n)
	}
}

// TestReserveKeepsRequest: a reservation journals the exact request
// bytes, and a reserve.v2 whose bytes do not hash to its request hash
// stops Open.
func TestReserveKeepsRequest(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
	w.Serve(t)
	d := peertest.InvokeDispatch(t, "k1", "calc.evaluate", `{"expression":"1+1"}`)
	peertest.Call(t, w.Dial(t), d)
	w.Stop()
	rr, err := reserveOf(t, w.Store, "k1")
	if err != nil || rr.Method != d.Method || rr.Path != d.Path || !bytes.Equal(rr.Body, d.Body) {
		t.Fatalf("kept request %+v %v", rr, err)
	}
	bad := *rr
	bad.Attempt, bad.Body = "k2", []byte(`{"tampered":true}`)
	bad.Ledger = hosttest.NextLedger(t, w.Store)
	hosttest.Append(t, w.Store, w.Pub, hostlog.KindReserveV2, bad)
	if _, err := operator.Open(w.Store); err == nil || !strings.Contains(err.Error(), "(reserve.v2): attempt k2: the kept request does not hash to the reservation's request hash") {
		t.Fatalf("open: %v", err)
	}
}

// reserveOf is the reservation of attempt id as the host journal of store
// holds it: its one reserve.v2 record, read without the journal's lock.
func reserveOf(t *testing.T, store, id string) (*hostlog.ReserveV2, error) {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var found []*hostlog.ReserveV2
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != hostlog.KindReserveV2 {
			return nil
		}
		rec, err := hostlog.Decode(r)
		if err != nil {
			return err
		}
		if b := rec.Body.(*hostlog.ReserveV2); b.Attempt == id {
			found = append(found, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d reserve.v2 records of attempt %s, want 1", len(found), id)
	}
	return found[0], nil
}

// TestCrashAtResolutionFailpoints: kill -9 after the resolve record and
// after the redeliver record, restart: nothing lost, doubled or charged
// twice.
func TestCrashAtResolutionFailpoints(t *testing.T) {
	cases := []struct {
		fp, action string
		state      msg.State // after the restart
		charged    uint64
		calls      int64
	}{
		{operator.FailAfterResolve, views.ResolveRelease, msg.StateReleased, 0, 0},
		{operator.FailAfterResolve, views.ResolveCharge, msg.StatePerformed, 5, 0},
		{operator.FailAfterRedeliverRecord, views.ResolveRedeliver, msg.StateUncertain, 5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.fp+"-"+tc.action, func(t *testing.T) {
			w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
			c := crashUncertain(t, w, "u1", tc.fp)
			code, _, errs := hosttest.RunCLI("attempts", "resolve", "u1", "--"+tc.action, "--reason", "after the crash", "--store", w.Store)
			if code != cli.ExitFailure {
				t.Fatalf("resolve through a dying host: exit %d %q", code, errs)
			}
			if ws := c.WaitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("host exit %v, want SIGKILL at %s", ws, tc.fp)
			}
			c = hosttest.StartChild(t, w.Store, "")
			in := peertest.Inspect(t, w.Dial(t), "u1")
			if in.State != tc.state {
				t.Fatalf("after restart: %s (%s), want %s", in.State, in.Detail, tc.state)
			}
			if tc.state == msg.StateUncertain {
				// the operator may redeliver again: it runs once
				if v := resolveJSON(t, w.Store, "u1", "redeliver", "again"); v.State != msg.StateDefinite || *v.Charged != 5 {
					t.Fatalf("second redelivery: %+v", v)
				}
				tc.calls = 1
			} else {
				code, _, errs := hosttest.RunCLI("attempts", "resolve", "u1", "--"+tc.action, "--reason", "twice", "--store", w.Store)
				if code != cli.ExitRefused || !strings.Contains(errs, "not uncertain") {
					t.Fatalf("second resolution: %d %q", code, errs)
				}
			}
			c.Stop(t)
			if n := w.App.Calls.Load(); n != tc.calls {
				t.Fatalf("the application saw %d requests, want %d", n, tc.calls)
			}
			w.WithStore(t, func(s *operator.Store) {
				if p, _ := s.PurseShow("ctl"); p.Charged != tc.charged {
					t.Fatalf("purse %+v, want charged %d", p, tc.charged)
				}
				rep, err := audit.VerifyStore(w.Store)
				if err != nil || rep.Receipts != 1 {
					t.Fatalf("verify: %+v %v", rep, err)
				}
			})
		})
	}
}

// crashUncertain makes attempt id uncertain by a host killed just before
// its first request byte (FailAfterMarkSend), and restarts the host with
// failpoint fp armed.
func crashUncertain(t *testing.T, w *hosttest.World, id, fp string) *hosttest.Child {
	t.Helper()
	c := hosttest.StartChild(t, w.Store, operator.FailAfterMarkSend)
	ctx, cancel := peertest.Ctx()
	_, err := w.Dial(t).Call(ctx, msg.TypeDispatch, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"6*7"}`))
	cancel()
	if err == nil {
		t.Fatal("the dispatch was answered; the host should have died")
	}
	if ws := c.WaitExit(t); !ws.Signaled() {
		t.Fatalf("host exit %v, want SIGKILL", ws)
	}
	c = hosttest.StartChild(t, w.Store, fp)
	if in := peertest.Inspect(t, w.Dial(t), id); in.State != msg.StateUncertain {
		t.Fatalf("after the crash: %+v", in)
	}
	return c
}

// TestAttemptsListBound: a list shows the latest MaxListedAttempts and
// counts the ones left off (here one past the bound), and what it shows
// fits the admin socket's reply frame even with long detail lines.
func TestAttemptsListBound(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
	forgeUncertain(t, w, views.MaxListedAttempts+1, strings.Repeat("d", 400))
	w.WithStore(t, func(s *operator.Store) {
		v, left, err := s.Attempts(msg.StateUncertain)
		if err != nil || len(v) != views.MaxListedAttempts || left != 1 || v[0].Attempt != "a0001" || v[len(v)-1].Attempt != fmt.Sprintf("a%04d", views.MaxListedAttempts) {
			t.Fatalf("list: %d shown, %d left off, first %s, err %v", len(v), left, v[0].Attempt, err)
		}
		b, err := wire.Marshal(admin.Reply{Attempts: v, AttemptsLeftOff: left})
		if err != nil || len(b) > wire.MaxReplyFrame-4096 {
			t.Fatalf("the list's reply is %d bytes (%v); the reply frame is %d", len(b), err, wire.MaxReplyFrame)
		}
	})
}

// forgeUncertain journals, in the stopped world's store, n uncertain
// attempts a0000, a0001, ... of ctl, reserved in that order (charge 0)
// and each left uncertain with detail: what the store replays as n
// attempts sent and never answered.
func forgeUncertain(t *testing.T, w *hosttest.World, n int, detail string) {
	t.Helper()
	ledger, day := hosttest.NextLedger(t, w.Store), utcDay(time.Now())
	j, err := journal.Open(filepath.Join(w.Store, hostlog.JournalDir), hostlog.Options(w.Pub))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range n {
		id := fmt.Sprintf("a%04d", i)
		d := peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)
		rec := hostlog.Reserve{Attempt: id, Controller: "ctl", Grant: w.Grant, Application: "app", Operation: "calc.evaluate",
			Kind: msg.KindInvoke, RequestSHA256: peertest.RequestSHA256(d), Day: day, Ledger: ledger + uint64(i)}
		if _, err := j.Append(hostlog.KindReserve, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(hostlog.KindUncertain, hostlog.Uncertain{Attempt: id, Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
}
