package operator

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// AddController pins a controller: its name, OS account UID, the public
// keys of its roles (msg.ControllerKeys CBOR) and its control socket
// (control.go), which a new controller must have. Its purse starts empty.
// While the host runs, the control socket is listened on before the
// record is journaled (Store.mutateControl).
func (s *Store) AddController(name string, uid uint32, keys []byte, control string) (views.ControllerView, error) {
	if control == "" {
		return views.ControllerView{}, views.Refusedf("controller %s: a control socket is required (--control PATH)", name)
	}
	rec := hostlog.ControllerAddV2{Name: name, UID: uid, Keys: keys, Control: control}
	var c *controller
	err := s.mutateControl(hostlog.KindControllerAddV2, rec, control,
		func() (_ *controller, err error) { c, err = s.st.checkControllerAdd(rec); return c, err },
		func() { s.st.addController(c) })
	if err != nil {
		return views.ControllerView{}, err
	}
	return controllerView(c), nil
}

// SetControllerControl records the control socket of a controller added
// before it was recorded, or moves it, and reports whether it changed: a
// controller's own socket again journals nothing. While the host runs,
// the new socket is listened on before the record is journaled and the
// old one closed after (Store.mutateControl).
func (s *Store) SetControllerControl(name, control string) (views.ControllerView, bool, error) {
	rec := hostlog.ControllerControl{Controller: name, Control: control}
	var c *controller
	err := s.mutateControl(hostlog.KindControllerControl, rec, control,
		func() (_ *controller, err error) {
			if c, err = s.st.checkControllerControl(rec); err != nil {
				return nil, err
			}
			if c.Control == control {
				return nil, errUnchanged
			}
			return c, nil
		},
		func() { c.Control = control })
	changed := true
	if errors.Is(err, errUnchanged) {
		changed, err = false, nil
	}
	if err != nil {
		return views.ControllerView{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return controllerView(c), changed, nil
}

func controllerView(c *controller) views.ControllerView {
	return views.ControllerView{Name: c.Name, UID: c.UID, ToolKID: c.tool.KID().String(), DispatchKID: c.dispatch.KID().String(), Control: c.Control}
}

// Controllers lists the pinned controllers in the order they were added.
func (s *Store) Controllers() []views.ControllerView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]views.ControllerView, 0, len(s.st.CtrlOrder))
	for _, n := range s.st.CtrlOrder {
		out = append(out, controllerView(s.st.Controllers[n]))
	}
	return out
}

// FundPurse adds amount credits to a controller's purse.
func (s *Store) FundPurse(name string, amount uint64) (views.PurseView, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if amount == 0 {
		return views.PurseView{}, views.Refusedf("fund amount must be at least 1")
	}
	s.mu.Lock()
	c, err := s.st.controller(name)
	if err == nil && c.Purse.Funded > math.MaxInt64-amount {
		err = views.Refusedf("purse %s: funding %d would pass the bound of %d credits", name, amount, uint64(math.MaxInt64))
	}
	if err != nil {
		s.mu.Unlock()
		return views.PurseView{}, err
	}
	// A balance change is applied before its append (see doc.go, the ledger).
	s.st.Ledger++
	rec := hostlog.PurseFund{Controller: name, Amount: amount, Ledger: s.st.Ledger}
	c.Purse.Funded += amount
	s.mu.Unlock()
	if _, err := s.append(hostlog.KindPurseFund, rec); err != nil {
		s.mu.Lock()
		c.Purse.Funded -= amount
		s.mu.Unlock()
		return views.PurseView{}, err
	}
	return s.PurseShow(name)
}

// Freeze stops a purse: it admits nothing until thawed. Freezing a frozen
// purse changes nothing and is not an error: it is the kill switch.
func (s *Store) Freeze(name string) (views.PurseView, error) { return s.setFrozen(name, true) }

// Thaw lets a frozen purse admit requests again.
func (s *Store) Thaw(name string) (views.PurseView, error) { return s.setFrozen(name, false) }

func (s *Store) setFrozen(name string, frozen bool) (views.PurseView, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.Lock()
	c, err := s.st.controller(name)
	same := err == nil && c.Purse.Frozen == frozen
	s.mu.Unlock()
	if err != nil {
		return views.PurseView{}, err
	}
	if !same {
		kind := hostlog.KindPurseThaw
		if frozen {
			kind = hostlog.KindPurseFreeze
		}
		if _, err := s.append(kind, hostlog.Purse{Controller: name}); err != nil {
			return views.PurseView{}, err
		}
		s.mu.Lock()
		c.Purse.Frozen = frozen
		s.mu.Unlock()
	}
	return s.PurseShow(name)
}

// PurseShow returns a controller's purse.
func (s *Store) PurseShow(name string) (views.PurseView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.st.controller(name)
	if err != nil {
		return views.PurseView{}, err
	}
	p := c.Purse
	return views.PurseView{Controller: name, Funded: p.Funded, Charged: p.Charged, Balance: p.balance(), Holds: p.Holds, Frozen: p.Frozen}, nil
}

// IssueGrant signs a new grant with the operator's hybrid key and journals it.
func (s *Store) IssueGrant(spec views.GrantSpec) (views.GrantView, error) {
	if s.key == nil {
		return views.GrantView{}, fmt.Errorf("store %s is open read-only", s.dir)
	}
	now := s.clock()
	if spec.NotBefore.IsZero() {
		spec.NotBefore = now
	}
	if !spec.NotAfter.After(now) {
		return views.GrantView{}, views.Refusedf("grant not-after %s is not in the future", spec.NotAfter.UTC().Format(time.RFC3339))
	}
	if spec.RefusalPrice > spec.Price {
		return views.GrantView{}, views.Refusedf("grant refusal price %d is above the price %d: a refusal never costs more than an answer", spec.RefusalPrice, spec.Price)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return views.GrantView{}, err
	}
	g := msg.Grant{
		ID: "g-" + hex.EncodeToString(id[:]), Controller: spec.Controller, Application: spec.Application,
		Operations: spec.Operations, Price: spec.Price, DiscoveryPrice: spec.DiscoveryPrice, PerDay: spec.PerDay,
		RefusalPrice: spec.RefusalPrice, NotBefore: spec.NotBefore.UnixMilli(), NotAfter: spec.NotAfter.UnixMilli(),
	}
	signed, err := msg.SignGrant(s.key, g)
	if err != nil {
		return views.GrantView{}, err
	}
	return s.ImportGrant(signed)
}

// ImportGrant journals a grant already signed with the operator's key,
// refusing one that does not verify (a byte changed) or does not fit.
func (s *Store) ImportGrant(signed []byte) (views.GrantView, error) {
	var g msg.Grant
	var v views.GrantView
	err := s.mutate(hostlog.KindGrantIssue, hostlog.GrantIssue{Grant: signed},
		func() (err error) { g, err = s.st.checkGrant(signed, s.pub); return err },
		func() { s.st.addGrant(g, signed); v = s.grantView(s.st.Grants[g.ID]) })
	return v, err
}

// RevokeGrant revokes a grant: from the append on, it admits nothing.
func (s *Store) RevokeGrant(id string) error {
	var g *grant
	return s.mutate(hostlog.KindGrantRevoke, hostlog.GrantRevoke{ID: id},
		func() error {
			var ok bool
			if g, ok = s.st.Grants[id]; !ok {
				return views.Refusedf("no grant %s", id)
			}
			if g.Revoked {
				return views.Refusedf("grant %s is already revoked", id)
			}
			return nil
		},
		func() { g.Revoked = true })
}

// Grants lists every grant, revoked and expired ones included.
func (s *Store) Grants() []views.GrantView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]views.GrantView, 0, len(s.st.GrantOrder))
	for _, id := range s.st.GrantOrder {
		out = append(out, s.grantView(s.st.Grants[id]))
	}
	return out
}

// SignedGrant returns a grant's signed bytes.
func (s *Store) SignedGrant(id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.st.Grants[id]
	if !ok {
		return nil, views.Refusedf("no grant %s", id)
	}
	return bytes.Clone(g.Signed), nil
}

func (s *Store) grantView(g *grant) views.GrantView {
	ops := g.Grant.Operations
	if ops == nil {
		ops = []string{}
	}
	return views.GrantView{
		ID: g.Grant.ID, Controller: g.Grant.Controller, Application: g.Grant.Application, Operations: ops,
		Price: g.Grant.Price, DiscoveryPrice: g.Grant.DiscoveryPrice, RefusalPrice: g.Grant.RefusalPrice, PerDay: g.Grant.PerDay,
		UsedToday: g.usedOn(utcDay(s.clockLocked())),
		NotBefore: time.UnixMilli(g.Grant.NotBefore).UTC().Format(time.RFC3339),
		NotAfter:  time.UnixMilli(g.Grant.NotAfter).UTC().Format(time.RFC3339),
		Revoked:   g.Revoked,
	}
}

// Routes lists the selected revision of every route, removed ones included.
func (s *Store) Routes() []views.RouteView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Views()
}

// Route returns every revision of one route, oldest first.
func (s *Store) Route(name string) ([]views.RouteView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.History(name)
}

// SignedRoute returns the signed bytes of a route's selected revision.
func (s *Store) SignedRoute(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Signed(name)
}

// BuildBundle signs a bundle for a controller: the host's public keys and
// account, its control socket, and the active routes of that controller
// as they are now (the controller reads its live routes on the control
// socket; a controller with no active route yet still gets a bundle, since
// adding an application needs no enrollment). Nothing secret.
func (s *Store) BuildBundle(controllerName string, hostUID uint32) ([]byte, error) {
	if s.key == nil {
		return nil, fmt.Errorf("store %s is open read-only", s.dir)
	}
	s.mu.Lock()
	c, err := s.st.controller(controllerName)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if c.Control == "" {
		s.mu.Unlock()
		return nil, views.Refusedf("controller %s has no control socket: set it with `steward-operator controller control %s --control PATH --store DIR`, then build the bundle", controllerName, controllerName)
	}
	b := msg.Bundle{Controller: controllerName, HostKey: s.pub.MarshalCOSEKey(), HostUID: hostUID, IssuedAt: s.clockLocked().UnixMilli(), Control: c.Control}
	for _, rv := range s.st.Active(controllerName) {
		b.Routes = append(b.Routes, rv.Signed)
	}
	s.mu.Unlock()
	return msg.SignBundle(s.key, b)
}

// BuildBundleReadOnly is BuildBundle on the store in dir opened read-only,
// signed with the operator key read from the store: it takes no lock, so
// it works while the host runs.
func BuildBundleReadOnly(dir, controllerName string, hostUID uint32) ([]byte, error) {
	key, err := ReadKey(dir)
	if err != nil {
		return nil, err
	}
	s, err := OpenReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if !key.Public().Equal(s.pub) {
		return nil, fmt.Errorf("%s does not match %s", KeyFile, hostlog.PubFile)
	}
	s.key = key
	return s.BuildBundle(controllerName, hostUID)
}

// HostKeyring returns a keyring of the host's Ed25519 key (receipts, frames).
func (s *Store) HostKeyring() *wire.Keyring { return s.hostRing }
