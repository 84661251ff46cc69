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

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

func TestConsentRules(t *testing.T) {
	k, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{cfg: &Config{Name: "dev"}, keys: &Keys{Dispatch: k}, led: ledger.New(), log: slog.Default()}
	h := sha256.Sum256([]byte("request"))
	b := ledger.Begin{Attempt: "a1", Application: "appliance", Operation: "op", RequestSHA256: h[:], Kind: msg.KindInvoke}
	if _, ok := c.led.Begin(b); !ok {
		t.Fatal("begin refused")
	}
	r := msg.Reserve{Attempt: "a1", Controller: "dev", Application: "appliance", Operation: "op", RequestSHA256: h[:], Charge: 5}

	wrong := r
	wrong.RequestSHA256 = make([]byte, 32)
	if typ, body := c.reserve(wrong); typ != msg.TypeRefused || body.(msg.Refusal).Code != msg.CodeNoConsent {
		t.Fatalf("wrong hash: %s %+v", typ, body)
	}
	// A reserve for another controller's name is refused .
	other := r
	other.Controller = "other"
	if typ, body := c.reserve(other); typ != msg.TypeRefused || body.(msg.Refusal).Code != msg.CodeNoConsent {
		t.Fatalf("another controller: %s %+v", typ, body)
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
	if err := c.verifyReceipt(good, "a1", req[:], body, 200); err != nil {
		t.Fatalf("genuine receipt: %v", err)
	}
	if err := c.verifyReceipt(bad, "a1", req[:], body, 200); !errors.Is(err, wire.ErrUnknownKID) {
		t.Fatalf("forged receipt: %v", err)
	}
	if err := c.verifyReceipt(good, "a2", req[:], body, 200); err == nil || err.Error() != "receipt is for attempt a1" {
		t.Fatalf("another attempt's receipt: %v", err)
	}
	if err := c.verifyReceipt(good, "a1", req[:], body, 500); err == nil || err.Error() != "receipt status 200 does not match the answer's 500" {
		t.Fatalf("another status: %v", err)
	}
}
