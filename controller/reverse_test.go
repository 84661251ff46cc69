package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

func TestConsentRules(t *testing.T) {
	k, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{cfg: &Config{Name: "dev"}, keys: &Keys{Dispatch: k}, led: newLedger(), log: slog.Default()}
	h := sha256.Sum256([]byte("request"))
	b := beginRecord{Attempt: "a1", Application: "appliance", Operation: "op", RequestSHA256: h[:], Kind: msg.KindInvoke}
	c.led.applyBegin(b, 2, true)
	r := msg.Reserve{Attempt: "a1", Controller: "dev", Application: "appliance", Operation: "op", RequestSHA256: h[:], Charge: 5}

	wrong := r
	wrong.RequestSHA256 = make([]byte, 32)
	if typ, body := c.reserve(wrong); typ != msg.TypeRefused || body.(msg.Refusal).Code != msg.CodeNoConsent {
		t.Fatalf("wrong hash: %s %+v", typ, body)
	}
	typ, body := c.reserve(r)
	if typ != msg.TypeConsent {
		t.Fatalf("consent: %s %+v", typ, body)
	}
	if _, err := msg.VerifyConsent(body.(msg.ConsentReply).Consent, wire.NewKeyring(k.Public()), r); err != nil {
		t.Fatalf("consent does not verify: %v", err)
	}
	if typ, body := c.reserve(r); typ != msg.TypeRefused || body.(msg.Refusal).Code != msg.CodeDuplicate {
		t.Fatalf("second consent: %s %+v", typ, body)
	}
	unknown := r
	unknown.Attempt = "nope"
	if typ, body := c.reserve(unknown); typ != msg.TypeRefused || body.(msg.Refusal).Code != msg.CodeUnknown {
		t.Fatalf("unknown: %s %+v", typ, body)
	}
	// An attempt found in the journal at start is never consented to.
	b2 := b
	b2.Attempt = "a2"
	c.led.applyBegin(b2, 3, false)
	r2 := r
	r2.Attempt = "a2"
	if typ, body := c.reserve(r2); typ != msg.TypeRefused || body.(msg.Refusal).Code != msg.CodeNoConsent {
		t.Fatalf("pre-restart attempt: %s %+v", typ, body)
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
	if err := ch.Send(msg.TypeReserve, "1", msg.Reserve{Attempt: "unknown", Controller: "dev", Application: "appliance", RequestSHA256: h[:], Charge: 1}); err != nil {
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
	// A settle carrying a receipt signed by another key.
	badReceipt, _ := msg.SignReceipt(forged, msg.Receipt{Attempt: "unknown"})
	ch.Send(msg.TypeSettle, "2", msg.Settle{Attempt: "unknown", Receipt: badReceipt})
	env, err = ch.Recv()
	if err != nil || env.T != msg.TypeRefused {
		t.Fatalf("forged receipt: %v %+v", err, env)
	}
	// Replay the captured settle frame byte for byte: the controller
	// refuses it and closes the channel.
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

// TestReceiptCheckedOnce: the settle and the dispatch result of an attempt
// carry the same receipt bytes; they share one signature check, while bytes
// that differ, or do not verify, are checked (and refused) on their own.
func TestReceiptCheckedOnce(t *testing.T) {
	hostKey, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := wire.GenerateSigningKey()
	c := &Controller{cfg: &Config{Name: "dev"}, bind: &Binding{HostRing: wire.NewKeyring(hostKey.Public())}, led: newLedger(), log: slog.Default()}
	req := sha256.Sum256([]byte("request"))
	body := []byte(`{"ok":true}`)
	resp := sha256.Sum256(body)
	c.led.applyBegin(beginRecord{Attempt: "a1", Application: "appliance", Operation: "op", RequestSHA256: req[:], Kind: msg.KindInvoke}, 2, true)
	rc := msg.Receipt{Seq: 1, Prev: make([]byte, 32), Attempt: "a1", Controller: "dev", Application: "appliance", Operation: "op",
		Kind: msg.KindInvoke, RequestSHA256: req[:], ResponseSHA256: resp[:], Status: 200}
	good, _ := msg.SignReceipt(hostKey, rc)
	bad, _ := msg.SignReceipt(forged, rc)

	if typ, b := c.settle(msg.Settle{Attempt: "a1", Receipt: good}); typ != msg.TypeSettled {
		t.Fatalf("settle: %s %+v", typ, b)
	}
	first := c.led.open["a1"].check
	if first == nil {
		t.Fatal("the settle's check was not kept for the result")
	}
	if err := c.verifyReceipt(good, "a1", req[:], body, 200); err != nil {
		t.Fatalf("result with the settled receipt: %v", err)
	}
	if c.led.open["a1"].check != first {
		t.Fatal("the result checked the same bytes again")
	}
	// Other bytes for the same attempt are verified on their own: a
	// forgery is refused although a good receipt was checked before.
	if err := c.verifyReceipt(bad, "a1", req[:], body, 200); !errors.Is(err, wire.ErrUnknownKID) {
		t.Fatalf("forged receipt for a checked attempt: %v", err)
	}
	if typ, b := c.settle(msg.Settle{Attempt: "a1", Receipt: bad}); typ != msg.TypeRefused {
		t.Fatalf("forged settle: %s %+v", typ, b)
	}
	// The result ends the attempt; a late settle of the same bytes matches
	// the journaled receipt, other bytes are refused.
	c.led.applyResult(resultRecord{Attempt: "a1", Outcome: msg.OutcomeDefinite, Status: 200, Body: body, Receipt: good}, 3)
	if typ, b := c.settle(msg.Settle{Attempt: "a1", Receipt: good}); typ != msg.TypeSettled {
		t.Fatalf("late settle: %s %+v", typ, b)
	}
	if typ, b := c.settle(msg.Settle{Attempt: "a1", Receipt: bad}); typ != msg.TypeRefused {
		t.Fatalf("late forged settle: %s %+v", typ, b)
	}
	other, _ := msg.SignReceipt(hostKey, msg.Receipt{Attempt: "a1", Status: 500})
	if typ, b := c.settle(msg.Settle{Attempt: "a1", Receipt: other}); typ != msg.TypeRefused || b.(msg.Refusal).Code != msg.CodeBadRequest {
		t.Fatalf("late settle of another genuine receipt: %s %+v", typ, b)
	}
}
