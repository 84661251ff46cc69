package ctlconf

import (
	"fmt"
	"slices"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Binding is what the controller trusts of its host, from the bundle.
type Binding struct {
	Bundle  msg.Bundle
	HostKey *wire.HybridPublicKey
	// HostRing pins the Ed25519 half of the host key: frames and receipts.
	HostRing *wire.Keyring
	// Routes maps each configured application to its route.
	Routes map[string]msg.RouteRecord
}

// LoadBundle reads and verifies the bundle at c.Bundle and matches every
// configured service to exactly one of its routes: a route whose name is in
// AllowedApplicationLifetimeRoutes, for the same application and protocol,
// and for this controller.
func LoadBundle(c *Config) (*Binding, error) {
	raw, err := ReadBounded(c.Bundle, MaxBundleBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: bundle: %w", ErrConfig, err)
	}
	b, pub, routes, err := msg.OpenBundle(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: bundle %s: %w", ErrConfig, c.Bundle, err)
	}
	if b.Controller != c.Name {
		return nil, fmt.Errorf("%w: bundle %s was built for controller %q, not %q", ErrConfig, c.Bundle, b.Controller, c.Name)
	}
	bind := &Binding{Bundle: b, HostKey: pub, HostRing: wire.NewKeyring(pub.Ed25519()), Routes: map[string]msg.RouteRecord{}}
	for _, s := range c.ToolTask.ApplicationServices {
		var found []msg.RouteRecord
		for _, r := range routes {
			if r.Application == s.Application && slices.Contains(c.AllowedApplicationLifetimeRoutes, r.Route) {
				found = append(found, r)
			}
		}
		switch {
		case len(found) == 0:
			return nil, fmt.Errorf("%w: service %q has no matching route: no route of the bundle for it is in allowedApplicationLifetimeRoutes", ErrConfig, s.Application)
		case len(found) > 1:
			return nil, fmt.Errorf("%w: service %q matches %d routes of the bundle; allow exactly one", ErrConfig, s.Application, len(found))
		}
		r := found[0]
		if r.Protocol != s.Protocol {
			return nil, fmt.Errorf("%w: service %q speaks %s but route %q speaks %s", ErrConfig, s.Application, s.Protocol, r.Route, r.Protocol)
		}
		if r.Controller != c.Name {
			return nil, fmt.Errorf("%w: route %q is for controller %q, not %q", ErrConfig, r.Route, r.Controller, c.Name)
		}
		if err := oracleops.ValidatePrefix(r.Prefix); err != nil {
			return nil, fmt.Errorf("%w: route %q: %w", ErrConfig, r.Route, err)
		}
		bind.Routes[s.Application] = r
	}
	return bind, nil
}
