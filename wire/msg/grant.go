package msg

import (
	"path"

	"github.com/stewardrt/steward/wire"
)

// Grant is the operator's signed authority for one controller to call one
// application: which operations (glob patterns over operation ids, as
// path.Match; none means all), at what price, how many a day, until when.
type Grant struct {
	ID             string   `cbor:"id"`
	Controller     string   `cbor:"controller"`
	Application    string   `cbor:"application"`
	Operations     []string `cbor:"operations"`
	Price          uint64   `cbor:"price"`          // credits per invocation
	DiscoveryPrice uint64   `cbor:"discoveryPrice"` // credits per discovery; 0 skips the reserve callback
	PerDay         uint64   `cbor:"perDay"`         // admitted requests per UTC day
	// RefusalPrice is what an application's answer other than 2xx costs
	// (at most Price). 0, the default, charges nothing for a refusal;
	// omitted when 0, so grants signed before it keep their bytes.
	RefusalPrice uint64 `cbor:"refusalPrice,omitempty"`
	NotBefore    int64  `cbor:"notBefore"` // unix ms
	NotAfter     int64  `cbor:"notAfter"`  // unix ms
}

// Covers reports whether g names application app and an operation pattern
// matching op. An empty op (a list request) is covered by any grant for app.
func (g *Grant) Covers(app, op string) bool {
	if g.Application != app {
		return false
	}
	if op == "" || len(g.Operations) == 0 {
		return true
	}
	for _, p := range g.Operations {
		if ok, err := path.Match(p, op); err == nil && ok {
			return true
		}
	}
	return false
}

// Live reports whether g is in force at unix ms now.
func (g *Grant) Live(now int64) bool {
	return now >= g.NotBefore && now < g.NotAfter
}

// SignGrant signs g with the operator's hybrid key.
func SignGrant(k *wire.HybridSigningKey, g Grant) ([]byte, error) { return signHybrid(k, g) }

// VerifyGrant checks both signatures of a grant.
func VerifyGrant(signed []byte, pub *wire.HybridPublicKey) (Grant, error) {
	var g Grant
	err := verifyHybrid(signed, pub, &g, "grant")
	return g, err
}
