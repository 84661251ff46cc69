package controller

import (
	"crypto/sha256"
	"sync"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// maxCachedGrants bounds the grants kept verified; a host has a handful.
const maxCachedGrants = 64

// grantCache keeps the grants the host cited that verified against the
// pinned host key, by the SHA-256 of their signed bytes: a hybrid
// verification costs about 340 us, too much to pay on every call, and the
// same bytes verify the same way every time.
type grantCache struct {
	mu sync.Mutex
	m  map[[32]byte]msg.Grant
}

// verify returns the grant signed is, verified against host once.
func (gc *grantCache) verify(signed []byte, host *wire.HybridPublicKey) (msg.Grant, error) {
	h := sha256.Sum256(signed)
	gc.mu.Lock()
	g, ok := gc.m[h]
	gc.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := msg.VerifyGrant(signed, host)
	if err != nil {
		return g, err
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.m == nil || len(gc.m) >= maxCachedGrants {
		// Revoked and replaced grants are never cited again: start over
		// rather than track which ones are still in use.
		gc.m = map[[32]byte]msg.Grant{}
	}
	gc.m[h] = g
	return g, nil
}
