package wire

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/cborhead"
)

func TestPrivateKeyConsistency(t *testing.T) {
	k := mustKey(t)
	other := mustKey(t)
	// x of one key with d of another: refused, not trusted.
	bad, _ := Marshal(okpPrivateKey{Kty: coseKtyOKP, Crv: coseCrvEd, X: other.pub.key, D: k.priv.Seed()})
	if _, err := parseSigningKey(bad); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "x is not the public key of d") {
		t.Fatalf("mismatched x and d: %v", err)
	}
	short, _ := Marshal(okpPrivateKey{Kty: coseKtyOKP, Crv: coseCrvEd, X: k.pub.key, D: k.priv.Seed()[:31]})
	if _, err := parseSigningKey(short); !errors.Is(err, ErrMalformed) {
		t.Fatalf("31-byte d: %v", err)
	}
	good, err := parseSigningKey(k.marshalPrivateCOSEKey())
	if err != nil || !good.Public().Equal(k.Public()) {
		t.Fatalf("good private key: %v", err)
	}

	h1, _ := GenerateHybridKey()
	h2, _ := GenerateHybridKey()
	// An ML-DSA pub that is not the public key of priv is refused.
	ml, _ := Marshal(akpPrivateKey{Kty: coseKtyAKP, Alg: coseAlgMLDSA, Pub: h2.pub.ml.Bytes(), Priv: h1.mlSeed[:]})
	set := cborhead.Append(nil, majorArray, 2)
	set = append(set, h1.ed.marshalPrivateCOSEKey()...)
	set = append(set, ml...)
	if _, err := parseHybridSigningKey(set); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "pub is not the public key of priv") {
		t.Fatalf("mismatched ML-DSA pub and priv: %v", err)
	}
	if got, err := parseHybridSigningKey(h1.marshalPrivate()); err != nil || !got.Public().Equal(h1.Public()) {
		t.Fatalf("good hybrid key: %v", err)
	}
}

func TestHybridSignatureOrder(t *testing.T) {
	h, _ := GenerateHybridKey()
	msg, _ := SignHybrid(h, []byte("p"))
	// Swap the two COSE_Signatures: same signatures, other order.
	r := cborReader{b: msg}
	r.head()
	r.head()
	r.bytes("")
	r.head()
	r.bytes("")
	r.head() // signatures array
	start := r.off
	r.head()
	r.bytes("")
	r.head()
	r.bytes("")
	mid := r.off
	swapped := append(append(bytes.Clone(msg[:start]), msg[mid:]...), msg[start:mid]...)
	if _, err := VerifyHybrid(swapped, h.Public()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("swapped signatures: %v, want ErrMalformed", err)
	}
}

func TestChannelConfigChecked(t *testing.T) {
	k := mustKey(t)
	for name, cfg := range map[string]ChannelConfig{
		"no key":       {Role: "r", PeerKeys: NewKeyring(k.Public()), SendLimit: 1, RecvLimit: 1},
		"no peer keys": {Key: k, Role: "r", PeerKeys: NewKeyring(), SendLimit: 1, RecvLimit: 1},
		"no role":      {Key: k, PeerKeys: NewKeyring(k.Public()), SendLimit: 1, RecvLimit: 1},
		"no limits":    {Key: k, Role: "r", PeerKeys: NewKeyring(k.Public())},
	} {
		a, b := socketPair(t)
		if _, err := ClientHandshake(a, cfg); err == nil {
			t.Fatalf("%s: client handshake accepted the config", name)
		}
		if _, err := ServerHandshake(b, cfg); err == nil {
			t.Fatalf("%s: server handshake accepted the config", name)
		}
	}
}

func TestClientClosed(t *testing.T) {
	p := newPair(t)
	cl := NewClient(p.client)
	cl.Close()
	if _, err := cl.Call(context.Background(), "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	if err := p.client.Send("x", "1", nil); err == nil {
		t.Fatal("channel still sends after the client closed it")
	}
}

func TestNewListener(t *testing.T) {
	// As with systemd socket activation: the listener comes from elsewhere.
	path := filepath.Join(t.TempDir(), "activated.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	key := mustKey(t)
	refuseOthers := func(c PeerCred) error {
		if c.UID != uint32(os.Geteuid()) {
			return errors.New("not us")
		}
		return nil
	}
	l := NewListener(ul, ListenConfig{Path: path, Allow: refuseOthers, MaxPerUID: 1, Refuse: RefuseFrame(key)})
	defer l.Close()
	if l.Path() != path {
		t.Fatalf("Path %q", l.Path())
	}
	accepted := make(chan *PeerConn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	ck := mustKey(t)
	c1, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	pc := <-accepted
	defer pc.Close()
	// A second connection of the same uid passes MaxPerUID 1: refused with a frame.
	c2, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ClientHandshake(c2, ChannelConfig{Key: ck, Role: "c", PeerKeys: NewKeyring(key.Public()), Path: path, SendLimit: MaxRequestFrame, RecvLimit: MaxReplyFrame})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "MaxPerUID 1") {
		t.Fatalf("second connection: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewListener without Allow did not panic")
		}
	}()
	NewListener(ul, ListenConfig{Path: path, Refuse: RefuseFrame(key)})
}
