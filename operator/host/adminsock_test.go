package host_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/host"
	"github.com/stewardrt/steward/wire"
)

// holdSilent opens n connections to the admin socket that never write.
func holdSilent(t *testing.T, path string, n int) []*net.UnixConn {
	t.Helper()
	var held []*net.UnixConn
	for range n {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	return held
}

// closedByServer wants c's next read to be the server's close.
func closedByServer(c *net.UnixConn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

// TestKillSwitchPastSilentAdminConnections: silent connections filling the
// admin socket past its cap never keep purse freeze or grant revoke out,
// nor delay them until the handshake bound frees their slots.
func TestKillSwitchPastSilentAdminConnections(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 7})
	w.Serve(t)
	path := admin.SocketPath(w.Store)
	held := holdSilent(t, path, host.AdminMaxConns+2)

	start := time.Now()
	a := openAdmin(t, w.Store)
	rep, err := a.Do(admin.Request{Op: admin.OpPurseFreeze, Name: "ctl"})
	if err != nil || rep.Purse == nil || !rep.Purse.Frozen {
		t.Fatalf("purse freeze past %d silent connections: %+v, %v", len(held), rep.Purse, err)
	}
	// a stays open while b connects: had it closed, whether the server
	// had freed its slot before b arrived would decide how many silent
	// connections b's arrival evicts.
	b := openAdmin(t, w.Store)
	if _, err := b.Do(admin.Request{Op: admin.OpGrantRevoke, Name: w.Grant}); err != nil {
		t.Fatalf("grant revoke past silent connections: %v", err)
	}
	b.Close()
	a.Close()
	// Promptly: well inside the handshake bound that would otherwise
	// have freed the silent connections' slots.
	if took := time.Since(start); took >= *host.AdminIdleTimeout/2 {
		t.Fatalf("the kill switch took %v", took)
	}
	// The oldest silent connections were closed to make room (two past
	// the cap, then one each for freeze and revoke).
	for i := range 4 {
		if !closedByServer(held[i]) {
			t.Fatalf("silent connection %d still open", i)
		}
	}
	w.Stop()
	w.WithStore(t, func(s *operator.Store) {
		p, err := s.PurseShow("ctl")
		if err != nil || !p.Frozen {
			t.Fatalf("after a restart the purse is %+v, %v; want frozen, from the journal", p, err)
		}
		for _, g := range s.Grants() {
			if g.ID == w.Grant && !g.Revoked {
				t.Fatalf("after a restart grant %s is not revoked", g.ID)
			}
		}
	})
}

// TestAdminIdleChannelIsClosed: a connection that completed its handshake
// and then says nothing holds its slot for adminIdleTimeout only.
func TestAdminIdleChannelIsClosed(t *testing.T) {
	old := *host.AdminIdleTimeout
	*host.AdminIdleTimeout = 300 * time.Millisecond
	t.Cleanup(func() { *host.AdminIdleTimeout = old })
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100})
	w.Serve(t)
	cl := dialAdminChannel(t, w.Store)
	if _, err := adminCall(cl, admin.Request{Op: admin.OpPurseFund, Name: "ctl", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	if err := cl.Err(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle channel ended with %v, want the server's close", err)
	}
	_, err := adminCall(cl, admin.Request{Op: admin.OpPurseFund, Name: "ctl", Amount: 1})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("a request on a channel closed for idling: %v, want EOF", err)
	}
}

// dialAdminChannel is the channel admin.Dial opens to the admin socket of
// the host serving store, as a *wire.Client the test watches (Done, Err):
// the same handshake, signed with the operator key.
func dialAdminChannel(t *testing.T, store string) *wire.Client {
	t.Helper()
	key, err := operator.ReadKey(store)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := peertest.Ctx()
	defer cancel()
	path, uid := admin.SocketPath(store), uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, path, uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: key.Ed25519(), Role: admin.RoleAdminClient, PeerRole: admin.RoleAdmin, PeerKeys: wire.NewKeyring(key.Public().Ed25519()),
		Path: path, Purpose: admin.PurposeAdmin, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	cl := wire.NewClient(ch)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// adminCall sends req on cl as an admin.Client's Do does, and returns the
// call's own error as it does.
func adminCall(cl *wire.Client, req admin.Request) (admin.Reply, error) {
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, admin.TypeAdmin, req)
	if err != nil {
		return admin.Reply{}, err
	}
	var rep admin.Reply
	if env.T != admin.TypeAdminResult {
		return rep, fmt.Errorf("the admin socket answered %s", env.T)
	}
	err = env.Decode(&rep)
	return rep, err
}
