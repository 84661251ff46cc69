package msg

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stewardrt/steward/wire"
)

func hybridKey(t *testing.T) *wire.HybridSigningKey {
	t.Helper()
	k, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestGrantCovers(t *testing.T) {
	g := Grant{Application: "appliance", Operations: []string{"calc.*", "text.sha256"}}
	for _, c := range []struct {
		app, op string
		want    bool
	}{
		{"appliance", "calc.evaluate", true},
		{"appliance", "text.sha256", true},
		{"appliance", "", true}, // a listing is filtered, not refused
		{"appliance", "units.convert", false},
		{"appliance", "calc", false},
		{"other", "calc.evaluate", false},
	} {
		if got := g.Covers(c.app, c.op); got != c.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.app, c.op, got, c.want)
		}
	}
	all := Grant{Application: "appliance"}
	if !all.Covers("appliance", "units.convert") {
		t.Error("a grant without patterns must cover every operation of its application")
	}
}

func TestGrantLive(t *testing.T) {
	g := Grant{NotBefore: 100, NotAfter: 200}
	for now, want := range map[int64]bool{99: false, 100: true, 199: true, 200: false} {
		if got := g.Live(now); got != want {
			t.Errorf("Live(%d) = %v, want %v", now, got, want)
		}
	}
}

func TestGrantSignature(t *testing.T) {
	k := hybridKey(t)
	g := Grant{ID: "g1", Controller: "c", Application: "appliance", Price: 1, PerDay: 10, NotAfter: 1 << 40}
	signed, err := SignGrant(k, g)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyGrant(signed, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != g.ID || got.Price != g.Price || got.NotAfter != g.NotAfter {
		t.Fatalf("round trip changed the grant: %+v", got)
	}
	if _, err := VerifyGrant(signed, hybridKey(t).Public()); err == nil {
		t.Fatal("a grant verified under another operator's key")
	}
	for i := range signed {
		bad := bytes.Clone(signed)
		bad[i] ^= 1
		if _, err := VerifyGrant(bad, k.Public()); err == nil {
			t.Fatalf("a grant with byte %d flipped verified", i)
		}
	}
}

func TestVerifyConsent(t *testing.T) {
	k, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	ring := wire.NewKeyring(k.Public())
	r := Reserve{Attempt: "a1", Controller: "c", Application: "appliance", Operation: "calc.evaluate",
		RequestSHA256: bytes.Repeat([]byte{7}, 32), Charge: 3}
	c := Consent{Attempt: r.Attempt, Controller: r.Controller, Application: r.Application,
		Operation: r.Operation, RequestSHA256: r.RequestSHA256, Charge: r.Charge, At: 1}
	signed, err := SignConsent(k, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyConsent(signed, ring, r); err != nil {
		t.Fatalf("good consent refused: %v", err)
	}
	for name, mutate := range map[string]func(*Reserve){
		"attempt":     func(r *Reserve) { r.Attempt = "a2" },
		"controller":  func(r *Reserve) { r.Controller = "d" },
		"application": func(r *Reserve) { r.Application = "x" },
		"operation":   func(r *Reserve) { r.Operation = "units.convert" },
		"hash":        func(r *Reserve) { r.RequestSHA256 = bytes.Repeat([]byte{8}, 32) },
		"charge":      func(r *Reserve) { r.Charge = 4 },
		"refusal":     func(r *Reserve) { r.RefusalPrice = 1 },
		"grant":       func(r *Reserve) { r.V, r.Grant = CustodyV2, []byte("a grant") },
	} {
		other := r
		mutate(&other)
		if _, err := VerifyConsent(signed, ring, other); !errors.Is(err, ErrMismatch) {
			t.Errorf("consent checked against a reservation with another %s: err = %v, want ErrMismatch", name, err)
		}
	}
	// Version 2 names the grant the reserve cites.
	r2 := r
	r2.V, r2.Grant = CustodyV2, []byte("the signed grant")
	c2 := c
	c2.V, c2.GrantSHA256, c2.Principal = CustodyV2, GrantHash(r2.Grant), "uid:1000"
	signed2, _ := SignConsent(k, c2)
	if got, err := VerifyConsent(signed2, ring, r2); err != nil || got.Principal != "uid:1000" {
		t.Fatalf("version 2 consent: %+v, %v", got, err)
	}
	other2 := r2
	other2.Grant = []byte("another grant")
	if _, err := VerifyConsent(signed2, ring, other2); !errors.Is(err, ErrMismatch) || err.Error() != "payer consent: signed object does not match: it does not name the grant the reservation cites" {
		t.Errorf("version 2 consent for another grant: %v", err)
	}
	c3 := c2
	c3.V = 3
	signed3, _ := SignConsent(k, c3)
	if _, err := VerifyConsent(signed3, ring, r2); !errors.Is(err, ErrMismatch) {
		t.Errorf("a version this build does not read: %v", err)
	}
	forger, _ := wire.GenerateSigningKey()
	forged, _ := SignConsent(forger, c)
	if _, err := VerifyConsent(forged, ring, r); !errors.Is(err, wire.ErrUnknownKID) {
		t.Errorf("consent by an unpinned key: err = %v, want ErrUnknownKID", err)
	}
}

func TestReceiptChainLink(t *testing.T) {
	k, _ := wire.GenerateSigningKey()
	r := Receipt{Seq: 1, Prev: make([]byte, 32), Attempt: "a1", Charge: 1, BalanceAfter: 9}
	signed, err := SignReceipt(k, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyReceipt(signed, wire.NewKeyring(k.Public()))
	if err != nil || got.BalanceAfter != 9 {
		t.Fatalf("VerifyReceipt = %+v, %v", got, err)
	}
	h := ReceiptHash(signed)
	if len(h) != 32 || bytes.Equal(h, ReceiptHash(append(bytes.Clone(signed[:len(signed)-1]), signed[len(signed)-1]^1))) {
		t.Fatal("ReceiptHash must be a 32-byte hash that changes with every byte")
	}
}

func TestOpenBundle(t *testing.T) {
	k := hybridKey(t)
	route := RouteRecord{Route: "r", Revision: 1, Application: "appliance", Protocol: ProtocolOracleOperationsV1,
		Controller: "c", Upstream: "/tmp/a.sock", Forward: "/tmp/f.sock", Reverse: "/tmp/r.sock", Prefix: "/v1"}
	sr, err := SignRoute(k, route)
	if err != nil {
		t.Fatal(err)
	}
	b := Bundle{Controller: "c", HostKey: k.Public().MarshalCOSEKey(), HostUID: 7, Routes: [][]byte{sr}}
	signed, err := SignBundle(k, b)
	if err != nil {
		t.Fatal(err)
	}
	got, pub, routes, err := OpenBundle(signed)
	if err != nil {
		t.Fatal(err)
	}
	if got.HostUID != 7 || !pub.Equal(k.Public()) || len(routes) != 1 || routes[0].Forward != route.Forward {
		t.Fatalf("OpenBundle = %+v, %d routes", got, len(routes))
	}

	// A route record signed by another key cannot ride in the bundle.
	other := hybridKey(t)
	foreign, _ := SignRoute(other, route)
	b.Routes = [][]byte{foreign}
	signed, _ = SignBundle(k, b)
	if _, _, _, err := OpenBundle(signed); err == nil {
		t.Fatal("a bundle carrying a route signed by another key opened")
	}
	// A bundle whose key is swapped for another is not self-consistent.
	b.Routes = [][]byte{sr}
	b.HostKey = other.Public().MarshalCOSEKey()
	signed, _ = SignBundle(k, b)
	if _, _, _, err := OpenBundle(signed); err == nil {
		t.Fatal("a bundle signed by a key other than the one it carries opened")
	}
	if _, _, _, err := OpenBundle([]byte{0xa0}); err == nil {
		t.Fatal("a non-COSE bundle opened")
	}
}

func TestCheckpointSignature(t *testing.T) {
	k := hybridKey(t)
	signed, err := SignCheckpoint(k, Checkpoint{Seq: 5, Head: make([]byte, 32), At: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := VerifyCheckpoint(signed, k.Public())
	if err != nil || c.Seq != 5 {
		t.Fatalf("VerifyCheckpoint = %+v, %v", c, err)
	}
	signed[len(signed)-1] ^= 1
	if _, err := VerifyCheckpoint(signed, k.Public()); err == nil {
		t.Fatal("a checkpoint with its ML-DSA signature altered verified")
	}
}

// TestLineBreakAt: the one rule of what breaks a line of text an agent, an
// advisor or an approver writes: CR, LF, U+2028 and U+2029, at their byte
// offset; a tab or any other character is within the line.
func TestLineBreakAt(t *testing.T) {
	for s, want := range map[string]int{
		"": -1, "one line\twith a tab": -1, "é\n": 2, "a\rb": 1, "ab\u2028": 2, "\u2029": 0,
	} {
		if got := LineBreakAt(s); got != want {
			t.Errorf("LineBreakAt(%q) = %d, want %d", s, got, want)
		}
	}
}
