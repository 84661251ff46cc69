package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// tapConn records every Write (one frame each) so a test can replay it.
type tapConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *tapConn) last() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[len(c.writes)-1]
}

type testPair struct {
	client, server       *Channel
	clientRaw, serverRaw *net.UnixConn
	tap                  *tapConn // the client's writes
	clientKey, serverKey *SigningKey
}

func configs(clientKey, serverKey *SigningKey) (client, server ChannelConfig) {
	client = ChannelConfig{Key: clientKey, Role: "controller-dispatch", PeerKeys: NewKeyring(serverKey.Public()),
		PeerRole: "host", Path: "/run/steward/host/r.sock", Purpose: "dispatch",
		SendLimit: MaxRequestFrame, RecvLimit: MaxReplyFrame}
	server = ChannelConfig{Key: serverKey, Role: "host", PeerKeys: NewKeyring(clientKey.Public()),
		PeerRole: "controller-dispatch", Path: "/run/steward/host/r.sock", Purpose: "dispatch",
		SendLimit: MaxReplyFrame, RecvLimit: MaxRequestFrame}
	return client, server
}

// handshake runs both sides over a socketpair and returns both results.
func handshake(t testing.TB, ccfg, scfg ChannelConfig) (c, s *Channel, cerr, serr error, p testPair) {
	t.Helper()
	p.clientRaw, p.serverRaw = socketPair(t)
	p.tap = &tapConn{Conn: p.clientRaw}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, serr = ServerHandshake(p.serverRaw, scfg)
	}()
	c, cerr = ClientHandshake(p.tap, ccfg)
	<-done
	p.client, p.server, p.clientKey, p.serverKey = c, s, ccfg.Key, scfg.Key
	return c, s, cerr, serr, p
}

func newPair(t testing.TB) testPair {
	t.Helper()
	ccfg, scfg := configs(mustKey(t), mustKey(t))
	_, _, cerr, serr, p := handshake(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	return p
}

type ping struct {
	N    int    `cbor:"n"`
	Text string `cbor:"text"`
}

func TestChannelRoundTrip(t *testing.T) {
	p := newPair(t)
	if !bytes.Equal(p.client.ID(), p.server.ID()) || len(p.client.ID()) != 32 {
		t.Fatalf("channel ids differ: %x %x", p.client.ID(), p.server.ID())
	}
	if !p.client.Peer().Equal(p.serverKey.Public()) || !p.server.Peer().Equal(p.clientKey.Public()) {
		t.Fatal("peer keys are not the handshake signers")
	}
	for i := 1; i <= 3; i++ {
		if err := p.client.Send("ping", "id", ping{N: i}); err != nil {
			t.Fatal(err)
		}
		e, err := p.server.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var b ping
		if err := e.Decode(&b); err != nil || b.N != i || e.Seq != uint64(i) || e.T != "ping" || e.ID != "id" {
			t.Fatalf("frame %d: %+v %+v %v", i, e, b, err)
		}
		if err := p.server.Send("pong", e.ID, ping{N: -i}); err != nil {
			t.Fatal(err)
		}
		r, err := p.client.Recv()
		if err != nil || r.Seq != uint64(i) || r.T != "pong" {
			t.Fatalf("reply %d: %+v %v", i, r, err)
		}
	}
	// A second connection between the same keys gets another channel id.
	q := newPair(t)
	if bytes.Equal(p.client.ID(), q.client.ID()) {
		t.Fatal("two connections share a channel id")
	}
}

func TestChannelIDEncoding(t *testing.T) {
	// Documented in doc.go: SHA-256 over length-prefixed fields, so moving a
	// byte from one role to the other changes the id.
	n1, n2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	a := channelID(n1, n2, "ab", "c", "/p")
	b := channelID(n1, n2, "a", "bc", "/p")
	if bytes.Equal(a, b) {
		t.Fatal("field boundaries are not bound into the channel id")
	}
	if bytes.Equal(channelID(n1, n2, "a", "b", "/p"), channelID(n2, n1, "a", "b", "/p")) {
		t.Fatal("nonce order is not bound into the channel id")
	}
}

// expectClosed checks that the server closed the connection: the client's
// raw side reads end of stream.
func expectClosed(t *testing.T, raw *net.UnixConn) {
	t.Helper()
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if n, err := raw.Read(b[:]); err != io.EOF {
		t.Fatalf("after a refused frame the connection is still open: read %d, %v", n, err)
	}
}

func TestChannelRefusesBadFrames(t *testing.T) {
	stranger := mustKey(t)
	// Another channel with the same keys, to capture a frame from.
	for _, c := range []struct {
		name   string
		inject func(t *testing.T, p testPair) []byte // bytes written raw after one good frame
		want   error
		text   string
	}{
		{"replayed frame", func(t *testing.T, p testPair) []byte {
			return p.tap.last()
		}, ErrReplay, "seq 1, already received up to 1"},
		{"reordered frame (seq+2)", func(t *testing.T, p testPair) []byte {
			return frameFor(t, p.clientKey, p.client.ID(), 3)
		}, ErrReorder, "seq 3, want 2"},
		{"cross-channel frame", func(t *testing.T, p testPair) []byte {
			other := newPairWithKeys(t, p.clientKey, p.serverKey)
			other.client.Send("ping", "x", ping{N: 1})
			other.client.Send("ping", "x", ping{N: 2})
			return other.tap.last() // seq 2, as the victim expects
		}, ErrCrossChannel, "carries channel"},
		{"hello replayed mid-channel", func(t *testing.T, p testPair) []byte {
			return p.tap.writes[0]
		}, ErrCrossChannel, "carries channel"},
		{"garbage", func(t *testing.T, p testPair) []byte {
			return prefixed([]byte("garbage, not COSE"))
		}, ErrMalformed, "COSE_Sign1 tag"},
		{"unsigned envelope", func(t *testing.T, p testPair) []byte {
			b, _ := Marshal(Envelope{V: 1, T: "ping", Ch: p.client.ID(), Seq: 2, ID: "x", Body: []byte{0xf6}})
			return prefixed(b)
		}, ErrMalformed, "COSE_Sign1 tag"},
		{"wrongly signed frame", func(t *testing.T, p testPair) []byte {
			f := frameFor(t, p.clientKey, p.client.ID(), 2)
			f[len(f)-1] ^= 0x01
			return f
		}, ErrBadSignature, "does not verify"},
		{"unknown kid", func(t *testing.T, p testPair) []byte {
			return frameFor(t, stranger, p.client.ID(), 2)
		}, ErrUnknownKID, "this channel's peer is kid"},
		{"version 2", func(t *testing.T, p testPair) []byte {
			b, _ := Marshal(Envelope{V: 2, T: "ping", Ch: p.client.ID(), Seq: 2, ID: "x", Body: []byte{0xf6}})
			m, _ := Sign1(p.clientKey, b)
			return prefixed(m)
		}, ErrMalformed, "envelope version 2"},
		{"unknown envelope field", func(t *testing.T, p testPair) []byte {
			b, _ := Marshal(map[string]any{"v": 1, "t": "ping", "ch": p.client.ID(), "seq": 2, "id": "x", "at": 0, "body": nil, "extra": 1})
			m, _ := Sign1(p.clientKey, b)
			return prefixed(m)
		}, ErrMalformed, "unknown field"},
		{"frame past the receive bound", func(t *testing.T, p testPair) []byte {
			return []byte{0x00, 0x04, 0x00, 0x01} // declares MaxRequestFrame+1
		}, ErrFrameTooLarge, "exceeds the request frame bound of 262144 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			if err := p.client.Send("ping", "a", ping{N: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.server.Recv(); err != nil {
				t.Fatal(err)
			}
			if _, err := p.clientRaw.Write(c.inject(t, p)); err != nil {
				t.Fatal(err)
			}
			e, err := p.server.Recv()
			if !errors.Is(err, c.want) || e != nil || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("Recv: %v, want %v containing %q", err, c.want, c.text)
			}
			expectClosed(t, p.clientRaw)
			if _, again := p.server.Recv(); again != err {
				t.Fatalf("second Recv: %v, want the first error again", again)
			}
		})
	}
}

func TestChannelPinsHelloKey(t *testing.T) {
	// Two keys pinned for the dialler: frames must keep coming from the one
	// that signed the hello.
	k1, k2, sk := mustKey(t), mustKey(t), mustKey(t)
	ccfg, scfg := configs(k1, sk)
	scfg.PeerKeys = NewKeyring(k1.Public(), k2.Public())
	_, _, cerr, serr, p := handshake(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	p.clientRaw.Write(frameFor(t, k2, p.client.ID(), 1))
	if _, err := p.server.Recv(); !errors.Is(err, ErrUnknownKID) {
		t.Fatalf("frame from the other pinned key: %v, want ErrUnknownKID", err)
	}
	expectClosed(t, p.clientRaw)
}

func newPairWithKeys(t *testing.T, ck, sk *SigningKey) testPair {
	ccfg, scfg := configs(ck, sk)
	_, _, cerr, serr, p := handshake(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	return p
}

// frameFor signs a well-formed ping frame on channel ch with seq.
func frameFor(t *testing.T, k *SigningKey, ch []byte, seq uint64) []byte {
	t.Helper()
	m, err := signEnvelope(k, &Envelope{V: 1, T: "ping", Ch: ch, Seq: seq, ID: "x", Body: []byte{0xf6}})
	if err != nil {
		t.Fatal(err)
	}
	return prefixed(m)
}

func prefixed(msg []byte) []byte {
	var b bytes.Buffer
	WriteFrame(&b, msg, len(msg))
	return b.Bytes()
}

func TestChannelSendBound(t *testing.T) {
	p := newPair(t)
	// An envelope around a byte string body: find the body size that makes
	// the frame exactly MaxRequestFrame, then one more byte.
	overhead := func(n int) int {
		b, _ := Marshal(make([]byte, n))
		e, _ := Marshal(Envelope{V: 1, T: "big", Ch: p.client.ID(), Seq: 1, ID: "b", At: time.Now().UnixMilli(), Body: b})
		m, _ := Sign1(p.clientKey, e)
		return len(m) - n
	}
	n := MaxRequestFrame - overhead(MaxRequestFrame-200)
	err := p.client.Send("big", "b", make([]byte, n+1))
	if !errors.Is(err, ErrFrameTooLarge) || !strings.Contains(err.Error(), "frame of 262145 bytes exceeds the request frame bound of 262144 bytes") {
		t.Fatalf("one byte past the bound: %v", err)
	}
	// Nothing was written and no sequence number was used: the next frame
	// the server sees is seq 1, the frame exactly at the bound. (The frame
	// is larger than the socket buffer, so the server reads concurrently.)
	type result struct {
		e   *Envelope
		err error
	}
	got := make(chan result, 1)
	go func() {
		e, err := p.server.Recv()
		got <- result{e, err}
	}()
	if err := p.client.Send("big", "b", make([]byte, n)); err != nil {
		t.Fatalf("frame at the bound: %v", err)
	}
	r := <-got
	e, err := r.e, r.err
	if err != nil || e.Seq != 1 {
		t.Fatalf("server got %+v, %v; want seq 1", e, err)
	}
	var body []byte
	if err := e.Decode(&body); err != nil || len(body) != n {
		t.Fatalf("body of %d bytes, %v", len(body), err)
	}
	if got := len(p.tap.last()) - 4; got != MaxRequestFrame {
		t.Fatalf("frame at the bound was %d bytes", got)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	for _, c := range []struct {
		name             string
		mod              func(c, s *ChannelConfig)
		clientErr        error
		serverErr        error
		text             string // in the client's error
		serverSentRefuse bool
	}{
		{"wrong dialler role", func(c, s *ChannelConfig) { c.Role = "controller-tool" },
			ErrRefused, ErrWrongPeer, `dialler announced role "controller-tool", this socket admits "controller-dispatch"`, true},
		{"wrong purpose", func(c, s *ChannelConfig) { c.Purpose = "custody" },
			ErrRefused, ErrWrongPeer, `purpose "custody"`, true},
		{"dialler key not pinned", func(c, s *ChannelConfig) { s.PeerKeys = NewKeyring(mustKey(t).Public()) },
			ErrRefused, ErrUnknownKID, "is not pinned for this socket", true},
		{"listener key not pinned", func(c, s *ChannelConfig) { c.PeerKeys = NewKeyring(mustKey(t).Public()) },
			ErrUnknownKID, nil, "is not pinned for this socket", false},
		{"wrong listener role", func(c, s *ChannelConfig) { c.PeerRole = "controller" },
			ErrWrongPeer, nil, `listener announced role "host", want "controller"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ccfg, scfg := configs(mustKey(t), mustKey(t))
			c.mod(&ccfg, &scfg)
			ch, sh, cerr, serr, p := handshake(t, ccfg, scfg)
			if ch != nil || !errors.Is(cerr, c.clientErr) || !strings.Contains(cerr.Error(), c.text) {
				t.Fatalf("client: %v, want %v containing %q", cerr, c.clientErr, c.text)
			}
			if c.serverErr != nil && (sh != nil || !errors.Is(serr, c.serverErr)) {
				t.Fatalf("server: %v, want %v", serr, c.serverErr)
			}
			if c.serverErr == nil && serr != nil {
				// The server finished its side; the client then hung up.
				t.Fatalf("server: %v", serr)
			}
			_ = p
		})
	}
}
