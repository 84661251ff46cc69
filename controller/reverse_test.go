package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// consentRig is a controller with no journal or sockets, a host key, and
// a grant it signed: enough to exercise reserve's rules.
type consentRig struct {
	c     *Controller
	host  *wire.HybridSigningKey
	grant []byte
	now   time.Time
}

func newConsentRig(t *testing.T, policy *ctlconf.Payer, price uint64) *consentRig {
	t.Helper()
	disp, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	host, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	rig := &consentRig{host: host, now: time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)}
	rig.grant = signTestGrant(t, host, price, rig.now)
	rig.c = newController(&Config{Name: "dev", Payer: policy}, nil, &Binding{HostKey: host.Public(), HostRing: wire.NewKeyring(host.Public().Ed25519())},
		&Keys{Dispatch: disp}, nil, slog.Default(), func() time.Time { return rig.now })
	return rig
}

func signTestGrant(t *testing.T, host *wire.HybridSigningKey, price uint64, now time.Time) []byte {
	t.Helper()
	g, err := msg.SignGrant(host, msg.Grant{ID: "g1", Controller: "dev", Application: "appliance", Price: price, DiscoveryPrice: 1,
		PerDay: 100, NotBefore: now.Add(-time.Hour).UnixMilli(), NotAfter: now.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// begin registers an invoke attempt of principal as dispatch would, its
// dispatch in flight, and returns the reserve a faithful host sends for it.
func (rig *consentRig) begin(t *testing.T, id, principal string, charge uint64) msg.Reserve {
	t.Helper()
	h := sha256.Sum256([]byte("request " + id))
	b := ledger.Begin{Attempt: id, Application: "appliance", Operation: "op", RequestSHA256: h[:], Kind: msg.KindInvoke,
		Principal: principal, Day: rig.c.pay.today(rig.c.now())}
	if _, ok := rig.c.led.Begin(b); !ok {
		t.Fatal("begin refused")
	}
	// As exchange does: the host reserves while the dispatch is in flight.
	rig.c.flight.start(id, msg.TypeDispatch)
	return msg.Reserve{V: msg.CustodyV2, Attempt: id, Controller: "dev", Application: "appliance", Operation: "op",
		RequestSHA256: h[:], Charge: charge, Grant: rig.grant}
}

func wantRefused(t *testing.T, typ string, body any, code, reason string) {
	t.Helper()
	ref, ok := body.(msg.Refusal)
	if typ != msg.TypeRefused || !ok || ref.Code != code || (reason != "" && ref.Reason != reason) {
		t.Fatalf("got %s %+v, want %s %q", typ, body, code, reason)
	}
}

// TestConsentRules: the controller consents once, to a journaled begin,
// at the price of the grant the host cites, signed by its dispatch key
// and naming the principal and the grant.
func TestConsentRules(t *testing.T) {
	rig := newConsentRig(t, &ctlconf.Payer{MaxPerCall: 10, PerDay: 100}, 5)
	c := rig.c
	r := rig.begin(t, "a1", "uid:1000", 5)

	wrong := r
	wrong.RequestSHA256 = make([]byte, 32)
	typ, body := c.reserve(wrong)
	wantRefused(t, typ, body, msg.CodeNoConsent, "reserve for attempt a1 does not match its journaled begin")
	other := r
	other.Controller = "other"
	typ, body = c.reserve(other)
	wantRefused(t, typ, body, msg.CodeNoConsent, "")
	v1 := r
	v1.V, v1.Grant = 0, nil
	typ, body = c.reserve(v1)
	wantRefused(t, typ, body, msg.CodeNoConsent, "reserve version 0 cites no grant: this controller consents only to a version 2 reserve, which carries the grant it charges by")
	// A grant the host key did not sign.
	forger, _ := wire.GenerateHybridKey()
	forged := r
	forged.Grant = signTestGrant(t, forger, 5, rig.now)
	typ, body = c.reserve(forged)
	wantRefused(t, typ, body, msg.CodeNoConsent, "the grant the reserve cites does not verify against the host key pinned in the bundle")
	// A host asking a charge other than the grant's price, either way.
	for _, charge := range []uint64{4, 6} {
		off := r
		off.Charge = charge
		typ, body = c.reserve(off)
		wantRefused(t, typ, body, msg.CodeNoConsent, fmt.Sprintf("the reserve for attempt a1 asks %d credits (refusal 0), the grant it cites prices it at 5 (refusal 0)", charge))
	}
	refusing := r
	refusing.RefusalPrice = 5
	typ, body = c.reserve(refusing)
	wantRefused(t, typ, body, msg.CodeNoConsent, "the reserve for attempt a1 asks 5 credits (refusal 5), the grant it cites prices it at 5 (refusal 0)")

	typ, body = c.reserve(r)
	if typ != msg.TypeConsent {
		t.Fatalf("consent: %s %+v", typ, body)
	}
	cs, err := msg.VerifyConsent(body.(msg.ConsentReply).Consent, wire.NewKeyring(c.keys.Dispatch.Public()), r)
	if err != nil {
		t.Fatalf("consent does not verify: %v", err)
	}
	if cs.V != msg.CustodyV2 || cs.Principal != "uid:1000" || !bytes.Equal(cs.GrantSHA256, msg.GrantHash(rig.grant)) || cs.Charge != 5 || cs.At != rig.now.UnixMilli() {
		t.Fatalf("consent %+v", cs)
	}
	typ, body = c.reserve(r)
	wantRefused(t, typ, body, msg.CodeDuplicate, "attempt a1 was already consented to")
	unknown := r
	unknown.Attempt = "nope"
	typ, body = c.reserve(unknown)
	wantRefused(t, typ, body, msg.CodeUnknown, "no journaled begin for attempt nope")
}

// TestPayerPolicy: no policy refuses every charge naming it; the per-call
// ceiling at N and N+1; the day's budget at N and N+1, per principal; a
// clock set back a day refills nothing; the next day does.
func TestPayerPolicy(t *testing.T) {
	rig := newConsentRig(t, nil, 5)
	typ, body := rig.c.reserve(rig.begin(t, "n1", "uid:1000", 5))
	wantRefused(t, typ, body, msg.CodePayerLimit, ctlconf.ErrNoPayerPolicy.Error())
	if rig.c.pay.refusalOf("n1") == nil {
		t.Fatal("the payer's refusal is not kept for the agent")
	}

	// The ceiling: a grant priced at the ceiling is consented, one past is not.
	rig = newConsentRig(t, &ctlconf.Payer{MaxPerCall: 5, PerDay: 12}, 6)
	typ, body = rig.c.reserve(rig.begin(t, "c1", "uid:1000", 6))
	wantRefused(t, typ, body, msg.CodePayerLimit, "the charge of 6 credits exceeds the payer's ceiling of 5 credits per call")
	rig.grant = signTestGrant(t, rig.host, 5, rig.now)
	for _, id := range []string{"d1", "d2"} {
		if typ, body := rig.c.reserve(rig.begin(t, id, "uid:1000", 5)); typ != msg.TypeConsent {
			t.Fatalf("%s: %s %+v", id, typ, body)
		}
	}
	// 10 of 12 spent: a third call of 5 is one past... 15 > 12.
	typ, body = rig.c.reserve(rig.begin(t, "d3", "uid:1000", 5))
	wantRefused(t, typ, body, msg.CodePayerLimit, "the payer's budget of 12 credits a day has 2 left today (UTC 2030-01-02), this call asks for 5; it refills at 00:00 UTC")
	// Another principal has its own budget; the foreground, without an
	// allowance, has none of the defaults.
	if typ, body := rig.c.reserve(rig.begin(t, "e1", "uid:1001", 5)); typ != msg.TypeConsent {
		t.Fatalf("another principal: %s %+v", typ, body)
	}
	typ, body = rig.c.reserve(rig.begin(t, "f1", "foreground", 5))
	wantRefused(t, typ, body, msg.CodePayerLimit, ctlconf.ErrNoForegroundAllowance.Error())
	// A definite result charged 2 of the 5 consented: 7 spent, 5 fits (12).
	res := ledger.Result{Attempt: "d1", Outcome: msg.StateDefinite, Receipt: []byte{1}, Charge: 2}
	rig.c.pay.settle("d1", &res)
	if typ, body := rig.c.reserve(rig.begin(t, "d4", "uid:1000", 5)); typ != msg.TypeConsent {
		t.Fatalf("at the budget: %s %+v", typ, body)
	}
	typ, body = rig.c.reserve(rig.begin(t, "d5", "uid:1000", 5))
	wantRefused(t, typ, body, msg.CodePayerLimit, "the payer's budget of 12 credits a day has 0 left today (UTC 2030-01-02), this call asks for 5; it refills at 00:00 UTC")

	// The clock set back a day: still counting against 2030-01-02.
	rig.now = rig.now.Add(-24 * time.Hour)
	rig.grant = signTestGrant(t, rig.host, 5, rig.now)
	typ, body = rig.c.reserve(rig.begin(t, "b1", "uid:1000", 5))
	wantRefused(t, typ, body, msg.CodePayerLimit, "the payer's budget of 12 credits a day has 0 left today (UTC 2030-01-02), this call asks for 5; it refills at 00:00 UTC")
	// The next day refills it.
	rig.now = rig.now.Add(48 * time.Hour)
	rig.grant = signTestGrant(t, rig.host, 5, rig.now)
	if typ, body := rig.c.reserve(rig.begin(t, "f1", "uid:1000", 5)); typ != msg.TypeConsent {
		t.Fatalf("the next day: %s %+v", typ, body)
	}
}

// recordConn keeps a copy of the last frame written.
type recordConn struct {
	net.Conn
	mu   sync.Mutex
	last []byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.last = append([]byte(nil), p...)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestReverseSocketForgedAndReplayed talks to the controller's reverse
// socket as the host would, with the real host key and with forgeries.
func TestReverseSocketForgedAndReplayed(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	hostKey, err := wire.ReadHybridKey(filepath.Join(s.store, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := s.cfg.Sockets.Reverse
	ctlKeys, err := LoadKeys(s.cfg.KeyDir)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(key *wire.SigningKey) (*wire.Channel, *recordConn, error) {
		me := uint32(os.Getuid())
		conn, err := wire.Dial(ctx, path, me, me)
		if err != nil {
			t.Fatal(err)
		}
		rc := &recordConn{Conn: conn}
		ch, err := wire.ClientHandshake(rc, wire.ChannelConfig{
			Key: key, Role: msg.RoleHost, PeerRole: msg.RoleControllerDispatch,
			PeerKeys: wire.NewKeyring(ctlKeys.Dispatch.Public()), Path: path, Purpose: msg.PurposeCustody,
			SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
		})
		return ch, rc, err
	}

	// A host impostor: a key the bundle does not pin.
	forged, _ := wire.GenerateSigningKey()
	if _, _, err := dial(forged); err == nil {
		t.Fatal("handshake with an unpinned key accepted")
	}

	ch, rc, err := dial(hostKey.Ed25519())
	if err != nil {
		t.Fatalf("genuine host handshake: %v", err)
	}
	h := sha256.Sum256([]byte("x"))
	grant := signTestGrant(t, hostKey, 1, time.Now())
	if err := ch.Send(msg.TypeReserve, "1", msg.Reserve{V: msg.CustodyV2, Attempt: "unknown", Controller: "dev", Application: "appliance", RequestSHA256: h[:], Charge: 1, Grant: grant}); err != nil {
		t.Fatal(err)
	}
	env, err := ch.Recv()
	if err != nil || env.T != msg.TypeRefused {
		t.Fatalf("reserve for an unknown attempt: %v %+v", err, env)
	}
	var ref msg.Refusal
	env.Decode(&ref)
	if ref.Code != msg.CodeUnknown {
		t.Fatalf("refusal %+v", ref)
	}
	// A frame the reverse socket does not serve (the settle of earlier
	// versions: a receipt now reaches the controller only in the dispatch
	// result) is refused, naming its type.
	ch.Send("settle", "2", msg.Inspect{Attempt: "unknown"})
	env, err = ch.Recv()
	ref = msg.Refusal{}
	if err != nil || env.T != msg.TypeRefused || env.Decode(&ref) != nil || ref.Reason != `unexpected frame type "settle" on the reverse socket` {
		t.Fatalf("a settle frame: %v %+v %+v", err, env, ref)
	}
	// Replay the captured frame byte for byte: the controller refuses it
	// and closes the channel.
	rc.mu.Lock()
	replay := rc.last
	rc.mu.Unlock()
	if _, err := rc.Conn.Write(replay); err != nil {
		t.Fatal(err)
	}
	if env, err := ch.Recv(); err == nil {
		t.Fatalf("replayed frame answered: %+v", env)
	}

	// A frame captured on one channel, sent on another: refused, closed.
	ch1, rc1, err := dial(hostKey.Ed25519())
	if err != nil {
		t.Fatal(err)
	}
	ch1.Send(msg.TypeReserve, "1", msg.Reserve{Attempt: "x"})
	ch1.Recv()
	rc1.mu.Lock()
	cross := rc1.last
	rc1.mu.Unlock()
	ch2, rc2, err := dial(hostKey.Ed25519())
	if err != nil {
		t.Fatal(err)
	}
	rc2.Conn.Write(cross)
	if env, err := ch2.Recv(); err == nil {
		t.Fatalf("cross-channel frame answered: %+v", env)
	} else if errors.Is(err, wire.ErrBadSignature) {
		t.Fatalf("unexpected: %v", err)
	}
	ch1.Close()
	ch2.Close()
}

// TestReceiptVerified: a receipt reaches the controller once, in the
// dispatch result, and is verified there against the pinned host key and
// the attempt: a forgery or another attempt's receipt is refused.
func TestReceiptVerified(t *testing.T) {
	hostKey, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := wire.GenerateSigningKey()
	c := &Controller{cfg: &Config{Name: "dev"}, bind: &Binding{HostRing: wire.NewKeyring(hostKey.Public())}, led: ledger.New(), log: slog.Default()}
	req := sha256.Sum256([]byte("request"))
	body := []byte(`{"ok":true}`)
	resp := sha256.Sum256(body)
	rc := msg.Receipt{Seq: 1, Prev: make([]byte, 32), Attempt: "a1", Controller: "dev", Application: "appliance", Operation: "op",
		Kind: msg.KindInvoke, RequestSHA256: req[:], ResponseSHA256: resp[:], Status: 200}
	good, _ := msg.SignReceipt(hostKey, rc)
	bad, _ := msg.SignReceipt(forged, rc)
	if _, err := c.verifyReceipt(good, "a1", req[:], body, 200); err != nil {
		t.Fatalf("genuine receipt: %v", err)
	}
	if _, err := c.verifyReceipt(bad, "a1", req[:], body, 200); !errors.Is(err, wire.ErrUnknownKID) {
		t.Fatalf("forged receipt: %v", err)
	}
	if _, err := c.verifyReceipt(good, "a2", req[:], body, 200); err == nil || err.Error() != "receipt is for attempt a1" {
		t.Fatalf("another attempt's receipt: %v", err)
	}
	if _, err := c.verifyReceipt(good, "a1", req[:], body, 500); err == nil || err.Error() != "receipt status 200 does not match the answer's 500" {
		t.Fatalf("another status: %v", err)
	}
}

// TestReceiptConsentChecked: a receipt must carry the consent this process
// signed for the attempt, byte for byte, and charge one of its prices or
// 0; after a restart (no consent in memory) the consent must verify with
// the controller's own dispatch key for this attempt and principal.
func TestReceiptConsentChecked(t *testing.T) {
	rig := newConsentRig(t, &ctlconf.Payer{MaxPerCall: 10, PerDay: 100}, 5)
	c := rig.c
	r := rig.begin(t, "a1", "uid:1000", 5)
	_, body := c.reserve(r)
	signed := body.(msg.ConsentReply).Consent
	b := ledger.Begin{Attempt: "a1", Application: "appliance", Operation: "op", RequestSHA256: r.RequestSHA256, Principal: "uid:1000"}
	rc := msg.Receipt{Attempt: "a1", Controller: "dev", Application: "appliance", Operation: "op", RequestSHA256: r.RequestSHA256, Charge: 5, Consent: signed}
	if err := c.checkReceiptConsent(rc, b); err != nil {
		t.Fatalf("the genuine receipt: %v", err)
	}
	over := rc
	over.Charge = 6
	if err := c.checkReceiptConsent(over, b); err == nil || err.Error() != "receipt charges 6, the payer consented to 5 for an answer and 0 for a refusal" {
		t.Fatalf("a charge above the consent: %v", err)
	}
	between := rc
	between.Charge = 3
	if err := c.checkReceiptConsent(between, b); err == nil || err.Error() != "receipt charges 3, the payer consented to 5 for an answer and 0 for a refusal" {
		t.Fatalf("a charge that is neither price: %v", err)
	}
	// Another attempt's genuine consent, reused.
	r2 := rig.begin(t, "a2", "uid:1000", 5)
	_, body2 := c.reserve(r2)
	reused := rc
	reused.Consent = body2.(msg.ConsentReply).Consent
	if err := c.checkReceiptConsent(reused, b); err == nil || err.Error() != "receipt carries a payer consent other than the one signed for attempt a1" {
		t.Fatalf("another attempt's consent: %v", err)
	}
	none := rc
	none.Consent = nil
	if err := c.checkReceiptConsent(none, b); err == nil || err.Error() != "receipt carries no payer consent, though one was signed for attempt a1" {
		t.Fatalf("no consent: %v", err)
	}

	// After a restart: nothing in memory, the signature and fields decide.
	res := ledger.Result{Attempt: "a1"}
	c.pay.settle("a1", &res)
	if err := c.checkReceiptConsent(rc, b); err != nil {
		t.Fatalf("the genuine receipt after a restart: %v", err)
	}
	if err := c.checkReceiptConsent(reused, b); err == nil || err.Error() != "receipt carries a payer consent for another attempt, request or principal than attempt a1" {
		t.Fatalf("another attempt's consent after a restart: %v", err)
	}
	forger, _ := wire.GenerateSigningKey()
	cs, _ := msg.OpenConsent(signed, wire.NewKeyring(c.keys.Dispatch.Public()))
	forgedBytes, _ := msg.SignConsent(forger, cs)
	forged := rc
	forged.Consent = forgedBytes
	if err := c.checkReceiptConsent(forged, b); !errors.Is(err, wire.ErrUnknownKID) {
		t.Fatalf("a consent the controller did not sign: %v", err)
	}
	free := rc
	free.Consent, free.Charge = nil, 1
	if err := c.checkReceiptConsent(free, b); err == nil || err.Error() != "receipt charges 1 with no payer consent" {
		t.Fatalf("a charge without a consent: %v", err)
	}
	free.Charge = 0
	if err := c.checkReceiptConsent(free, b); err != nil {
		t.Fatalf("a free receipt: %v", err)
	}
}
