package host_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// utcDay is the UTC day number of t, as the host counts per-day limits.
func utcDay(t time.Time) int64 { return t.UnixMilli() / 86_400_000 }

// nextUTCDay is the start of the UTC day after day, as a refusal names it
// (what the core's nextUTCDay computes).
func nextUTCDay(day int64) string {
	return time.UnixMilli((day + 1) * 86_400_000).UTC().Format(time.RFC3339)
}

// dailyLimitReason is the host's refusal of a call past a per-day limit
// on day: it names the start of the next UTC day.
func dailyLimitReason(day int64) string {
	return "the daily limit for this call is reached: it refills at " + nextUTCDay(day) + " (the next UTC day)"
}

func TestAdmittedCallAndReceipt(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateDefinite || res.Status != 200 || !bytes.Contains(res.Body, []byte(`"operationId":"calc.evaluate"`)) {
		t.Fatalf("got %+v %s", res, res.Body)
	}
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1 || r.Charge != 7 || r.BalanceAfter != 93 || r.Attempt != "a1" || r.Status != 200 || r.Consent == nil {
		t.Fatalf("receipt %+v", r)
	}
	if _, err := msg.VerifyConsent(r.Consent, wire.NewKeyring(w.Peer.Disp.Public()), msg.Reserve{Attempt: "a1", Controller: "ctl",
		Application: "app", Operation: "calc.evaluate", RequestSHA256: r.RequestSHA256, Charge: 7}); err != nil {
		t.Fatal(err)
	}
	in := peertest.Inspect(t, cl, "a1")
	if in.State != msg.StateDefinite || in.Status != 200 || !bytes.Equal(in.Receipt, res.Receipt) || !bytes.Equal(in.Body, res.Body) {
		t.Fatalf("inspect %+v", in)
	}
	if in := peertest.Inspect(t, cl, "nobody"); in.State != msg.StateNotSeen {
		t.Fatalf("inspect unknown: %+v", in)
	}
	// a second dispatch of the same attempt is refused, never delivered twice
	calls := w.App.Calls.Load()
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDuplicate, "a1")
	if w.App.Calls.Load() != calls {
		t.Fatal("duplicate delivered")
	}
	// the application's own refusal stays a refusal, and is not charged
	res = peertest.Call(t, cl, peertest.InvokeDispatch(t, "a2", "calc.evaluate", `{"expression":"1/0"}`))
	if res.Outcome != msg.StateDefinite || res.Status != 422 || !bytes.Contains(res.Body, []byte("division by zero")) {
		t.Fatalf("app refusal: %+v", res)
	}
	r, err = msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != msg.StateDefinite || r.Status != 422 || r.Charge != 0 || r.PriceApplied != msg.PriceNone || r.BalanceAfter != 93 || r.Consent == nil {
		t.Fatalf("receipt of a 422: %+v", r)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		p, _ := s.PurseShow("ctl")
		if p.Balance != 93 || p.Charged != 7 {
			t.Fatalf("purse %+v", p)
		}
		rep, err := audit.VerifyStore(w.Store)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Receipts != 2 || rep.CoveredThrough != 2 || rep.Uncovered != 0 || rep.Purses[0].Balance != 93 {
			t.Fatalf("report %+v", rep)
		}
	})
}

func TestRefusals(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 4, PerDay: 3, Ops: []string{"calc.*"}})
	// an expired grant for another application, and a revoked one for a third
	w.WithStore(t, func(s *operator.Store) {
		key, err := wire.ReadHybridKey(w.Store + "/" + operator.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		signed, err := msg.SignGrant(key, msg.Grant{ID: "g-old", Controller: "ctl", Application: "oldapp", PerDay: 5, Price: 1,
			NotBefore: now.Add(-2 * time.Hour).UnixMilli(), NotAfter: now.Add(-time.Hour).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ImportGrant(signed); err != nil {
			t.Fatal(err)
		}
		g, err := s.IssueGrant(views.GrantSpec{Controller: "ctl", Application: "gone", PerDay: 5, NotAfter: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeGrant(g.ID); err != nil {
			t.Fatal(err)
		}
		for _, app := range []string{"oldapp", "gone", "nogrant"} {
			rr := w.Route
			rr.Forward = w.Dir + "/" + app + ".sock"
			if _, err := s.RegisterRoute(app, app, rr); err != nil {
				t.Fatal(err)
			}
		}
	})
	w.Serve(t)
	cl := w.Dial(t)
	other := func(app string) *wire.Client { return w.Peer.Dial(t, w.Dir+"/"+app+".sock", w.Pub) }
	before := w.App.Calls.Load()
	peertest.WantRefusal(t, peertest.Call(t, other("nogrant"), peertest.InvokeDispatch(t, "n1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, "no grant covers operation calc.evaluate of application nogrant")
	peertest.WantRefusal(t, peertest.Call(t, other("oldapp"), peertest.InvokeDispatch(t, "n2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application oldapp is not in force: calls resume once the operator issues a grant in force")
	peertest.WantRefusal(t, peertest.Call(t, other("gone"), peertest.InvokeDispatch(t, "n3", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application gone is revoked: calls resume once the operator issues a new grant")
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "n4", "text.sha256", `{}`)), msg.CodeNoGrant, "no grant covers operation text.sha256 of application app")
	// a request that is not the protocol's one canonical form, or not one
	// of its requests at all, is refused before admission
	d := peertest.InvokeDispatch(t, "n5", "calc.evaluate", `{"expression":"1+1"}`)
	d.Body = append(d.Body[:len(d.Body)-1], ' ', '}')
	peertest.WantRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, "invoke: the request is not in its one canonical form")
	d = peertest.InvokeDispatch(t, "n6", "calc.evaluate", `{"expression":"1+1"}`)
	d.Method = "PUT"
	peertest.WantRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, "PUT /v1/invoke is none of the protocol's requests")
	d = peertest.InvokeDispatch(t, "n6", "calc.evaluate", `{"expression":"1+1"}`)
	d.Path = "/v2/invoke"
	peertest.WantRefusal(t, peertest.Call(t, cl, d), msg.CodeBadRequest, `path "/v2/invoke" is not under the route's prefix /v1`)
	// two admitted calls spend 8 of 10; the third is insufficient
	for _, id := range []string{"ok1", "ok2"} {
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "n7", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeInsufficient, "the purse has too few credits for this call: calls resume when the operator funds it")
	// frozen purse: the kill switch, through the running daemon's admin socket
	adm := openAdmin(t, w.Store)
	if _, err := adm.Do(admin.Request{Op: admin.OpPurseFreeze, Name: "ctl"}); err != nil {
		t.Fatal(err)
	}
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "n8", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeFrozen, "the purse is frozen: calls resume when the operator thaws it")
	if _, err := adm.Do(admin.Request{Op: admin.OpPurseThaw, Name: "ctl"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Do(admin.Request{Op: admin.OpPurseFund, Name: "ctl", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	// per-day 3: the third admitted request of the day is the last
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok3", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("ok3: %+v", res)
	}
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "n9", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, dailyLimitReason(utcDay(time.Now())))
	if got := w.App.Calls.Load() - before; got != 3 {
		t.Fatalf("the application saw %d requests, want the 3 admitted", got)
	}
	// after a restart nothing is refilled: the daily count and the balance
	// are counted from durable records
	w.Stop()
	w.Serve(t)
	cl = w.Dial(t)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "n10", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, dailyLimitReason(utcDay(time.Now())))
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		p, _ := s.PurseShow("ctl")
		if p.Balance != 110-12 || p.Frozen {
			t.Fatalf("purse %+v", p)
		}
	})
}

func TestInsufficientAfterRestart(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 5, Price: 5})
	w.Serve(t)
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatal(res)
	}
	w.Stop()
	w.Serve(t)
	cl = w.Dial(t)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "a2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeInsufficient, "the purse has too few credits for this call: calls resume when the operator funds it")
}

func TestForgedConsent(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 50, Price: 5})
	w.Serve(t)
	cl := w.Dial(t)
	w.Peer.Forge.Store(true)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "f1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoConsent, "the payer's consent could not be obtained; nothing was sent or charged")
	w.Peer.Forge.Store(false)
	w.Peer.RefuseReserve.Store(true)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "f2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoConsent, "the payer refused consent: no-consent: not journaled; nothing was sent or charged")
	if w.App.Calls.Load() != 0 {
		t.Fatal("a request without consent was delivered")
	}
	for id, reason := range map[string]string{
		"f1": "refused before consent: the payer's consent could not be obtained",
		"f2": "the payer refused: no-consent: not journaled",
	} {
		in := peertest.Inspect(t, cl, id)
		r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
		if in.State != msg.StateRefused || err != nil || r.Outcome != msg.StateRefused || r.Reason != reason || r.Charge != 0 || r.Consent != nil {
			t.Fatalf("inspect %s: %+v, receipt %+v, %v", id, in, r, err)
		}
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 50 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
	})
}

func TestDiscoveryThroughGrant(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 3, Ops: []string{"calc.*", "units.convert"}})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.ListDispatch(t, "l1"))
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("%+v", res)
	}
	var lr struct {
		Operations []struct{ ID string } `json:"operations"`
	}
	if err := json.Unmarshal(res.Body, &lr); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range lr.Operations {
		ids = append(ids, o.ID)
	}
	if strings.Join(ids, ",") != "calc.evaluate,units.convert" {
		t.Fatalf("listed %v", ids)
	}
	if res := peertest.Call(t, cl, peertest.DescribeDispatch(t, "d1", "units.convert")); res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("%+v", res)
	}
	// an uncovered operation that exists and one that does not: the same refusal
	a := peertest.Call(t, cl, peertest.DescribeDispatch(t, "d2", "text.sha256"))
	b := peertest.Call(t, cl, peertest.DescribeDispatch(t, "d3", "text.nothing"))
	peertest.WantRefusal(t, a, msg.CodeNoGrant, "covers operation text.sha256")
	peertest.WantRefusal(t, b, msg.CodeNoGrant, "covers operation text.nothing")
	if strings.ReplaceAll(a.Refusal.Reason, "text.sha256", "X") != strings.ReplaceAll(b.Refusal.Reason, "text.nothing", "X") {
		t.Fatalf("refusals differ: %q vs %q", a.Refusal.Reason, b.Refusal.Reason)
	}
	// free discovery skips the reserve callback
	if n := w.Peer.Reserves.Load(); n != 0 {
		t.Fatalf("%d reserve callbacks for free discovery", n)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 10 {
			t.Fatalf("discovery charged: %+v", p)
		}
		rep, err := audit.VerifyStore(w.Store)
		if err != nil || rep.Receipts != 2 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
}

func TestNotSentReleases(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 4, NoApp: true})
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ns1", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateNotSent || res.Detail != "the application could not be reached" {
		t.Fatalf("%+v", res)
	}
	peertest.WantNoInternals(t, res.Detail)
	if in := peertest.Inspect(t, cl, "ns1"); in.State != msg.StateNotSent {
		t.Fatalf("%+v", in)
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 10 || p.Charged != 0 {
			t.Fatalf("not released: %+v", p)
		}
		if _, err := audit.VerifyStore(w.Store); err != nil {
			t.Fatal(err)
		}
	})
}

func openAdmin(t testing.TB, store string) admin.Client {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	a, err := admin.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if typ := fmt.Sprintf("%T", a); typ != "*admin.socketClient" {
		t.Fatalf("admin.Open opened the store directly while the daemon runs (%s)", typ)
	}
	return a
}

// TestDispatchV1Read: a dispatch from an older controller, which also sent
// copies of what its bytes say, is still read, and those copies are never
// used: admission, consent and the receipt take the application from the
// route and the operation and hash from the request bytes, even when the
// copies say otherwise.
func TestDispatchV1Read(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7})
	w.Serve(t)
	cl := w.Dial(t)
	d := peertest.InvokeDispatch(t, "v1-1", "calc.evaluate", `{"expression":"1+1"}`)
	d.DispatchV1 = msg.DispatchV1{Application: "other", Kind: msg.KindList, Operation: "text.sha256",
		Query: "x", RequestSHA256: make([]byte, 32), RequestID: "r-other", ConversationID: "c-other"}
	res := peertest.Call(t, cl, d)
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("a v1 dispatch: %+v %s", res, res.Body)
	}
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Application != "app" || r.Operation != "calc.evaluate" || r.Kind != msg.KindInvoke || !bytes.Equal(r.RequestSHA256, peertest.RequestSHA256(d)) || r.Charge != 7 {
		t.Fatalf("receipt %+v: want the route's application and the bytes' operation and hash", r)
	}
}
