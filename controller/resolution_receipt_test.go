package controller

import (
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestResolutionReceiptChecked: the controller records an operator's
// release or charge only with a receipt the pinned host key signed for
// this attempt, request and controller, naming the resolution, its
// resolver and reason and no response, and charging what it may.
func TestResolutionReceiptChecked(t *testing.T) {
	s := newStack(t, stackOpts{})
	c, err := open(s.cfgPath, nil, historyOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.j.Close()
	hostKey, err := wire.ReadHybridKey(filepath.Join(s.store, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	req := sha256.Sum256([]byte("request"))
	b := ledger.Begin{Attempt: "a1", Application: "appliance", Operation: "op", RequestSHA256: req[:]}
	good := func() msg.Receipt {
		return msg.Receipt{V: msg.ReceiptV2, Seq: 1, Prev: make([]byte, 32), Attempt: "a1", Controller: c.cfg.Name,
			Application: "appliance", Operation: "op", Kind: msg.KindInvoke, RequestSHA256: req[:],
			Outcome: msg.StateReleased, Reason: "never ran", ResolvedBy: "uid:7"}
	}
	cases := []struct {
		name  string
		state msg.State
		edit  func(*msg.Receipt)
		key   *wire.HybridSigningKey
		want  string
	}{
		{"a release", msg.StateReleased, func(*msg.Receipt) {}, hostKey, ""},
		{"another key", msg.StateReleased, func(*msg.Receipt) {}, other, "receipt:"},
		{"another attempt", msg.StateReleased, func(r *msg.Receipt) { r.Attempt = "a2" }, hostKey, "receipt is for attempt a2"},
		{"another request", msg.StateReleased, func(r *msg.Receipt) { r.RequestSHA256 = make([]byte, 32) }, hostKey, "receipt request hash does not match the journaled begin"},
		{"another outcome", msg.StateReleased, func(r *msg.Receipt) { r.Outcome = msg.StatePerformed }, hostKey, `receipt outcome "performed", the host reports released`},
		{"no resolver", msg.StateReleased, func(r *msg.Receipt) { r.ResolvedBy = "" }, hostKey, "receipt of a resolution names no resolver or no reason"},
		{"a response", msg.StateReleased, func(r *msg.Receipt) { r.Status = 200 }, hostKey, "receipt of a resolution names a response"},
		{"a release that charges", msg.StateReleased, func(r *msg.Receipt) { r.Charge = 3 }, hostKey, "receipt of a release charges 3"},
		{"a charge with no consent", msg.StatePerformed, func(r *msg.Receipt) { r.Outcome, r.Charge = msg.StatePerformed, 5 }, hostKey, "receipt charges 5 with no payer consent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.edit(&r)
			signed, err := msg.SignReceipt(tc.key.Ed25519(), r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.verifyResolutionReceipt(msg.InspectResult{Attempt: "a1", State: tc.state, Receipt: signed}, b)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRedeliveredReceiptResolverChecked: the controller records the answer
// to an operator's redelivery only when its receipt names the resolver the
// host's inspect says redelivered it, and keeps that resolver; an answer
// the host says nothing of a redelivery for names none.
func TestRedeliveredReceiptResolverChecked(t *testing.T) {
	s := newStack(t, stackOpts{})
	c, err := open(s.cfgPath, nil, historyOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.j.Close()
	hostKey, err := wire.ReadHybridKey(filepath.Join(s.store, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	req := sha256.Sum256([]byte("request"))
	body := []byte(`{"text":"once"}`)
	resp := sha256.Sum256(body)
	b := ledger.Begin{Attempt: "a1", Application: "appliance", Operation: "op", RequestSHA256: req[:]}
	for _, tc := range []struct {
		name, resolvedBy, redeliveredBy, want string
	}{
		{"a redelivery names its resolver", "uid:7", "uid:7", ""},
		{"an answer the host found", "", "", ""},
		{"a redelivery's receipt names none", "", "uid:7",
			`names resolver ""; the host says the attempt was redelivered by "uid:7"`},
		{"another resolver", "uid:8", "uid:7",
			`names resolver "uid:8"; the host says the attempt was redelivered by "uid:7"`},
		{"a resolver with no redelivery", "uid:7", "",
			`names resolver "uid:7"; the host says the attempt was redelivered by ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signed, err := msg.SignReceipt(hostKey.Ed25519(), msg.Receipt{V: msg.ReceiptV2, Seq: 1, Prev: make([]byte, 32), Attempt: "a1",
				Controller: c.cfg.Name, Application: "appliance", Operation: "op", Kind: msg.KindInvoke, RequestSHA256: req[:],
				ResponseSHA256: resp[:], Status: 200, Outcome: msg.StateDefinite, PriceApplied: msg.PriceNone, ResolvedBy: tc.resolvedBy})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := c.resolution(b, msg.InspectResult{Attempt: "a1", State: msg.StateDefinite, Status: 200, Body: body,
				Receipt: signed, RedeliveredBy: tc.redeliveredBy}, "agent call")
			if tc.want == "" {
				if err != nil || rec.State != msg.StateDefinite || rec.ResolvedBy != tc.resolvedBy || rec.ByOperator() {
					t.Fatalf("%+v %v", rec, err)
				}
				return
			}
			if !errors.Is(err, ErrNotResolvable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
