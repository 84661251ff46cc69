package ctlconf

import (
	"fmt"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Binding is what the controller trusts of its host, from the bundle: the
// host's key and account and its control socket. Which applications the
// controller reaches is not in it: the host's active routes, asked live on
// the control socket, are the one authority on them.
type Binding struct {
	Bundle  msg.Bundle
	HostKey *wire.HybridPublicKey
	// HostRing pins the Ed25519 half of the host key: frames and receipts.
	HostRing *wire.Keyring
}

// LoadBundle reads and verifies the bundle at c.Bundle: built for this
// controller, and carrying the host's control socket (a bundle built
// before it has none, and is refused: rebuild it).
func LoadBundle(c *Config) (*Binding, error) {
	raw, err := ReadBounded(c.Bundle, MaxBundleBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: bundle: %w", ErrConfig, err)
	}
	b, pub, _, err := msg.OpenBundle(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: bundle %s: %w", ErrConfig, c.Bundle, err)
	}
	if b.Controller != c.Name {
		return nil, fmt.Errorf("%w: bundle %s was built for controller %q, not %q", ErrConfig, c.Bundle, b.Controller, c.Name)
	}
	if b.Control == "" {
		return nil, fmt.Errorf("%w: bundle %s names no control socket (it was built before the host had one): rebuild it with `steward-operator bundle build %s`", ErrConfig, c.Bundle, c.Name)
	}
	return &Binding{Bundle: b, HostKey: pub, HostRing: wire.NewKeyring(pub.Ed25519())}, nil
}
