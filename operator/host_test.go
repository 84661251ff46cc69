package operator

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

func TestAdmittedCallAndReceipt(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 100, price: 7})
	w.serve(t)
	cl := w.dial(t)
	res := call(t, cl, invokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateDefinite || res.Status != 200 || !bytes.Contains(res.Body, []byte(`"operationId":"calc.evaluate"`)) {
		t.Fatalf("got %+v %s", res, res.Body)
	}
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1 || r.Charge != 7 || r.BalanceAfter != 93 || r.Attempt != "a1" || r.Status != 200 || r.Consent == nil {
		t.Fatalf("receipt %+v", r)
	}
	if _, err := msg.VerifyConsent(r.Consent, wire.NewKeyring(w.peer.disp.Public()), msg.Reserve{Attempt: "a1", Controller: "ctl",
		Application: "app", Operation: "calc.evaluate", RequestSHA256: r.RequestSHA256, Charge: 7}); err != nil {
		t.Fatal(err)
	}
	in := inspect(t, cl, "a1")
	if in.State != msg.StateDefinite || in.Status != 200 || !bytes.Equal(in.Receipt, res.Receipt) || !bytes.Equal(in.Body, res.Body) {
		t.Fatalf("inspect %+v", in)
	}
	if in := inspect(t, cl, "nobody"); in.State != msg.StateNotSeen {
		t.Fatalf("inspect unknown: %+v", in)
	}
	// a second dispatch of the same attempt is refused, never delivered twice
	calls := w.app.calls.Load()
	wantRefusal(t, call(t, cl, invokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDuplicate, "a1")
	if w.app.calls.Load() != calls {
		t.Fatal("duplicate delivered")
	}
	// the application's own refusal stays a refusal, and is not charged
	res = call(t, cl, invokeDispatch(t, "a2", "calc.evaluate", `{"expression":"1/0"}`))
	if res.Outcome != msg.StateDefinite || res.Status != 422 || !bytes.Contains(res.Body, []byte("division by zero")) {
		t.Fatalf("app refusal: %+v", res)
	}
	r, err = msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != msg.StateDefinite || r.Status != 422 || r.Charge != 0 || r.PriceApplied != msg.PriceNone || r.BalanceAfter != 93 || r.Consent == nil {
		t.Fatalf("receipt of a 422: %+v", r)
	}
	w.stop()
	w.withStore(t, func(s *Store) {
		p, _ := s.PurseShow("ctl")
		if p.Balance != 93 || p.Charged != 7 {
			t.Fatalf("purse %+v", p)
		}
		rep, err := s.VerifyReceipts(1)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Receipts != 2 || rep.CoveredThrough != 2 || rep.Uncovered != 0 || rep.Purses[0].Balance != 93 {
			t.Fatalf("report %+v", rep)
		}
	})
}

func TestRefusals(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 10, price: 4, perDay: 3, ops: []string{"calc.*"}})
	// an expired grant for another application, and a revoked one for a third
	w.withStore(t, func(s *Store) {
		key, err := wire.ReadHybridKey(w.store + "/" + keyFile)
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
		g, err := s.IssueGrant(GrantSpec{Controller: "ctl", Application: "gone", PerDay: 5, NotAfter: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeGrant(g.ID); err != nil {
			t.Fatal(err)
		}
		for _, app := range []string{"oldapp", "gone", "nogrant"} {
			rr := w.route
			rr.Forward = w.dir + "/" + app + ".sock"
			if _, err := s.RegisterRoute(app, app, rr); err != nil {
				t.Fatal(err)
			}
		}
	})
	w.serve(t)
	cl := w.dial(t)
	other := func(app string) *wire.Client { return w.peer.dial(t, w.dir+"/"+app+".sock", w.pub) }
	before := w.app.calls.Load()
	wantRefusal(t, call(t, other("nogrant"), invokeDispatch(t, "n1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, "no grant covers operation calc.evaluate of application nogrant")
	wantRefusal(t, call(t, other("oldapp"), invokeDispatch(t, "n2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application oldapp is not in force: calls resume once the operator issues a grant in force")
	wantRefusal(t, call(t, other("gone"), invokeDispatch(t, "n3", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoGrant, "the grant that covers operation calc.evaluate of application gone is revoked: calls resume once the operator issues a new grant")
	wantRefusal(t, call(t, cl, invokeDispatch(t, "n4", "text.sha256", `{}`)), msg.CodeNoGrant, "no grant covers operation text.sha256 of application app")
	// a request that is not the protocol's one canonical form, or not one
	// of its requests at all, is refused before admission
	d := invokeDispatch(t, "n5", "calc.evaluate", `{"expression":"1+1"}`)
	d.Body = append(d.Body[:len(d.Body)-1], ' ', '}')
	wantRefusal(t, call(t, cl, d), msg.CodeBadRequest, "invoke: the request is not in its one canonical form")
	d = invokeDispatch(t, "n6", "calc.evaluate", `{"expression":"1+1"}`)
	d.Method = "PUT"
	wantRefusal(t, call(t, cl, d), msg.CodeBadRequest, "PUT /v1/invoke is none of the protocol's requests")
	d = invokeDispatch(t, "n6", "calc.evaluate", `{"expression":"1+1"}`)
	d.Path = "/v2/invoke"
	wantRefusal(t, call(t, cl, d), msg.CodeBadRequest, `path "/v2/invoke" is not under the route's prefix /v1`)
	// two admitted calls spend 8 of 10; the third is insufficient
	for _, id := range []string{"ok1", "ok2"} {
		if res := call(t, cl, invokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	wantRefusal(t, call(t, cl, invokeDispatch(t, "n7", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeInsufficient, "the purse has too few credits for this call: calls resume when the operator funds it")
	// frozen purse: the kill switch, through the running daemon's admin socket
	adm := admin(t, w.store)
	if _, err := adm.Do(AdminRequest{Op: OpPurseFreeze, Name: "ctl"}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, call(t, cl, invokeDispatch(t, "n8", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeFrozen, "the purse is frozen: calls resume when the operator thaws it")
	if _, err := adm.Do(AdminRequest{Op: OpPurseThaw, Name: "ctl"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Do(AdminRequest{Op: OpPurseFund, Name: "ctl", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	// per-day 3: the third admitted request of the day is the last
	if res := call(t, cl, invokeDispatch(t, "ok3", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("ok3: %+v", res)
	}
	wantRefusal(t, call(t, cl, invokeDispatch(t, "n9", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, dailyLimitReason(utcDay(time.Now())))
	if got := w.app.calls.Load() - before; got != 3 {
		t.Fatalf("the application saw %d requests, want the 3 admitted", got)
	}
	// after a restart nothing is refilled: the daily count and the balance
	// are counted from durable records
	w.stop()
	w.serve(t)
	cl = w.dial(t)
	wantRefusal(t, call(t, cl, invokeDispatch(t, "n10", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDailyLimit, dailyLimitReason(utcDay(time.Now())))
	w.stop()
	w.withStore(t, func(s *Store) {
		p, _ := s.PurseShow("ctl")
		if p.Balance != 110-12 || p.Frozen {
			t.Fatalf("purse %+v", p)
		}
	})
}

func TestInsufficientAfterRestart(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 5, price: 5})
	w.serve(t)
	cl := w.dial(t)
	if res := call(t, cl, invokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatal(res)
	}
	w.stop()
	w.serve(t)
	cl = w.dial(t)
	wantRefusal(t, call(t, cl, invokeDispatch(t, "a2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeInsufficient, "the purse has too few credits for this call: calls resume when the operator funds it")
}

func TestForgedConsent(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 50, price: 5})
	w.serve(t)
	cl := w.dial(t)
	w.peer.forge.Store(true)
	wantRefusal(t, call(t, cl, invokeDispatch(t, "f1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoConsent, "the payer's consent could not be obtained; nothing was sent or charged")
	w.peer.forge.Store(false)
	w.peer.refuseReserve.Store(true)
	wantRefusal(t, call(t, cl, invokeDispatch(t, "f2", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeNoConsent, "the payer refused consent: no-consent: not journaled; nothing was sent or charged")
	if w.app.calls.Load() != 0 {
		t.Fatal("a request without consent was delivered")
	}
	for id, reason := range map[string]string{
		"f1": "refused before consent: the payer's consent could not be obtained",
		"f2": "the payer refused: no-consent: not journaled",
	} {
		in := inspect(t, cl, id)
		r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.pub.Ed25519()))
		if in.State != msg.StateRefused || err != nil || r.Outcome != msg.StateRefused || r.Reason != reason || r.Charge != 0 || r.Consent != nil {
			t.Fatalf("inspect %s: %+v, receipt %+v, %v", id, in, r, err)
		}
	}
	w.stop()
	w.withStore(t, func(s *Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 50 || p.Holds != 0 {
			t.Fatalf("purse %+v", p)
		}
	})
}

func TestDiscoveryThroughGrant(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 10, price: 3, ops: []string{"calc.*", "units.convert"}})
	w.serve(t)
	cl := w.dial(t)
	res := call(t, cl, listDispatch(t, "l1"))
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
	if res := call(t, cl, describeDispatch(t, "d1", "units.convert")); res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("%+v", res)
	}
	// an uncovered operation that exists and one that does not: the same refusal
	a := call(t, cl, describeDispatch(t, "d2", "text.sha256"))
	b := call(t, cl, describeDispatch(t, "d3", "text.nothing"))
	wantRefusal(t, a, msg.CodeNoGrant, "covers operation text.sha256")
	wantRefusal(t, b, msg.CodeNoGrant, "covers operation text.nothing")
	if strings.ReplaceAll(a.Refusal.Reason, "text.sha256", "X") != strings.ReplaceAll(b.Refusal.Reason, "text.nothing", "X") {
		t.Fatalf("refusals differ: %q vs %q", a.Refusal.Reason, b.Refusal.Reason)
	}
	// free discovery skips the reserve callback
	if n := w.peer.reserves.Load(); n != 0 {
		t.Fatalf("%d reserve callbacks for free discovery", n)
	}
	w.stop()
	w.withStore(t, func(s *Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 10 {
			t.Fatalf("discovery charged: %+v", p)
		}
		rep, err := s.VerifyReceipts(1)
		if err != nil || rep.Receipts != 2 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
}

func TestNotSentReleases(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 10, price: 4, noApp: true})
	w.serve(t)
	cl := w.dial(t)
	res := call(t, cl, invokeDispatch(t, "ns1", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateNotSent || res.Detail != "the application could not be reached" {
		t.Fatalf("%+v", res)
	}
	wantNoInternals(t, res.Detail)
	if in := inspect(t, cl, "ns1"); in.State != msg.StateNotSent {
		t.Fatalf("%+v", in)
	}
	w.stop()
	w.withStore(t, func(s *Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 10 || p.Charged != 0 {
			t.Fatalf("not released: %+v", p)
		}
		if _, err := s.VerifyReceipts(1); err != nil {
			t.Fatal(err)
		}
	})
}

func admin(t testing.TB, store string) Admin {
	t.Helper()
	ctx, cancel := testCtx()
	defer cancel()
	a, err := OpenAdmin(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*Store); ok {
		t.Fatal("OpenAdmin opened the store directly while the daemon runs")
	}
	return a
}

// TestDispatchV1Read: a dispatch from an older controller, which also sent
// copies of what its bytes say, is still read, and those copies are never
// used: admission, consent and the receipt take the application from the
// route and the operation and hash from the request bytes, even when the
// copies say otherwise.
func TestDispatchV1Read(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 100, price: 7})
	w.serve(t)
	cl := w.dial(t)
	d := invokeDispatch(t, "v1-1", "calc.evaluate", `{"expression":"1+1"}`)
	d.DispatchV1 = msg.DispatchV1{Application: "other", Kind: msg.KindList, Operation: "text.sha256",
		Query: "x", RequestSHA256: make([]byte, 32), RequestID: "r-other", ConversationID: "c-other"}
	res := call(t, cl, d)
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("a v1 dispatch: %+v %s", res, res.Body)
	}
	r, err := msg.VerifyReceipt(res.Receipt, wire.NewKeyring(w.pub.Ed25519()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Application != "app" || r.Operation != "calc.evaluate" || r.Kind != msg.KindInvoke || !bytes.Equal(r.RequestSHA256, requestSHA256(d)) || r.Charge != 7 {
		t.Fatalf("receipt %+v: want the route's application and the bytes' operation and hash", r)
	}
}
