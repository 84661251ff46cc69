package host_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestConsentOutlivesTheForwardChannel: a controller that consents and dies
// at once leaves its consent queued on the reverse socket while its forward
// socket reports EOF. The host must act on the consent it was given, not
// drop the attempt because it read the forward EOF first. The peer closes
// its forward channel's write side before it answers the reserve, and
// answers only once the host has read that EOF (and so cancelled the
// dispatch's handler) and closed its side: the host must still deliver,
// record the outcome, charge once and settle.
func TestConsentOutlivesTheForwardChannel(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7})
	w.Serve(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	uid := uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, w.Route.Forward, uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: w.Peer.Tool, Role: msg.RoleControllerTool, PeerRole: msg.RoleHost, PeerKeys: wire.NewKeyring(w.Pub.Ed25519()),
		Path: w.Route.Forward, Purpose: msg.PurposeDispatch, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := wire.NewClient(ch)
	defer cl.Close()

	hostClosed := make(chan error, 1)
	hook := func() {
		// The dispatch is on the host's side; the controller "dies": EOF
		// on the forward channel, and the host closes its end in turn.
		if err := conn.CloseWrite(); err != nil {
			hostClosed <- err
			return
		}
		select {
		case <-cl.Done():
			hostClosed <- nil
		case <-ctx.Done():
			hostClosed <- ctx.Err()
		}
	}
	w.Peer.BeforeConsent.Store(&hook)

	calls := w.App.Calls.Load()
	if _, err := cl.Call(ctx, msg.TypeDispatch, peertest.InvokeDispatch(t, "gone-1", "calc.evaluate", `{"expression":"2+3"}`)); err == nil {
		t.Fatal("the dispatch was answered on a forward channel the controller had closed")
	}
	if err := <-hostClosed; err != nil {
		t.Fatalf("waiting for the host to close the forward channel: %v", err)
	}
	w.Peer.BeforeConsent.Store(nil)

	// The host finishes the consented delivery on its own: a shutdown
	// waits for every dispatch in flight, so once it returns the attempt's
	// fate is durable.
	w.Stop()
	if got := w.App.Calls.Load() - calls; got != 1 {
		t.Fatalf("the application was called %d times, want 1", got)
	}
	w.WithStore(t, func(s *operator.Store) {
		in, err := s.Inspect("ctl", "gone-1")
		if err != nil || in.State != msg.StateDefinite || in.Status != 200 || in.Receipt == nil {
			t.Fatalf("inspect: %+v %v", in, err)
		}
	})
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Balance != 93 || p.Charged != 7 {
			t.Fatalf("purse %+v, want one charge of 7", p)
		}
	})
}
