package dev

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/operator/views"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// What the dev mode provisions (the issue's numbers).
const (
	// ControllerName is the one controller of the dev mode.
	ControllerName = "dev"
	// Application is the reference application's name in grants and routes.
	Application = "appliance"
	// RouteName is the route from the host to the reference application.
	RouteName = "appliance"
	// InitialFunds is what the purse is funded with on first start.
	InitialFunds = 1_000_000
	// Price is the grant's price of one call, in credits.
	Price = 1
	// PerDay is the grant's daily count.
	PerDay = 100_000
	// PayerMaxPerCall and PayerPerDay are the dev controller's payer
	// policy: the most it consents to for one call and, per principal, in
	// a UTC day. Ten times the grant's price, and enough for PerDay calls.
	PayerMaxPerCall = 10 * Price
	PayerPerDay     = PerDay * Price
	// GrantLifetime is how long a grant the dev mode issues lasts; a later
	// start issues a new one once it has expired.
	GrantLifetime = 365 * 24 * time.Hour
)

// routeTimeouts bound each delivery to the reference application.
var routeTimeouts = msg.Timeouts{ConnectMs: 2000, ResponseMs: 30000}

// provision creates on first start, and checks and reuses on later starts:
// the operator store, the controller's keys, the controller pinned in the
// store with a funded purse, a live grant, the selected route, the bundle
// and the controller config. It goes through the same exported APIs the
// commands use (package operator's Store, package controller's keys and
// config), and leaves the store closed for the host daemon to open. It
// writes one line per thing it creates to w.
func provision(l Layout, w io.Writer) error {
	for _, d := range []string{l.State, l.Controller, l.Appliance} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if _, err := os.Stat(l.OperatorStore); errors.Is(err, fs.ErrNotExist) {
		if _, err := operator.InitWith(l.OperatorStore, operator.InitOptions{JournalSegmentSize: JournalSegmentSize}); err != nil {
			return fmt.Errorf("operator store: %w", err)
		}
		fmt.Fprintf(w, "created the operator store %s\n", l.OperatorStore)
	} else if err != nil {
		return err
	}
	pubPath := filepath.Join(l.ControllerKey, "controller.pub")
	if _, err := os.Stat(pubPath); errors.Is(err, fs.ErrNotExist) {
		if pubPath, err = controller.InitKeys(l.ControllerKey); err != nil {
			return fmt.Errorf("controller keys: %w", err)
		}
		fmt.Fprintf(w, "created the controller's keys in %s\n", l.ControllerKey)
	} else if err != nil {
		return err
	}
	pub, err := os.ReadFile(pubPath)
	if err != nil {
		return err
	}

	st, err := operator.Open(l.OperatorStore)
	if err != nil {
		return fmt.Errorf("operator store: %w", err)
	}
	defer st.Close()
	uid := uint32(os.Getuid())
	if err := pinController(st, l, uid, pub, pubPath, w); err != nil {
		return err
	}
	if err := fundPurse(st, w); err != nil {
		return err
	}
	if err := ensureGrant(st, w); err != nil {
		return err
	}
	if err := ensureRoute(st, l, w); err != nil {
		return err
	}
	bundle, err := st.BuildBundle(ControllerName, uid)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := durable.WriteAtomic(l.Bundle, bundle, 0o600); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	return writeConfig(l, uid, w)
}

// pinController pins the dev controller in the store, or checks that the
// pinned account and keys are the ones this start runs with.
func pinController(st *operator.Store, l Layout, uid uint32, pub []byte, pubPath string, w io.Writer) error {
	keys, err := controller.ReadPublicKeys(pubPath)
	if err != nil {
		return err
	}
	tool, err := wire.ParsePublicKey(keys.Tool)
	if err != nil {
		return fmt.Errorf("%s: tool key: %w", pubPath, err)
	}
	for _, c := range st.Controllers() {
		if c.Name != ControllerName {
			continue
		}
		if c.UID != uid {
			return fmt.Errorf("the store pins controller %s to uid %d, but the dev mode runs as uid %d: use a fresh --state", ControllerName, c.UID, uid)
		}
		if c.ToolKID != tool.KID().String() {
			return fmt.Errorf("the store pins controller %s with tool key %s, but %s holds %s: use a fresh --state", ControllerName, c.ToolKID, pubPath, tool.KID())
		}
		if c.Control != l.ControlSocket {
			return fmt.Errorf("the store pins controller %s with control socket %q, not this layout's %s: use a fresh --state", ControllerName, c.Control, l.ControlSocket)
		}
		return nil
	}
	if _, err := st.AddController(ControllerName, uid, pub, l.ControlSocket); err != nil {
		return fmt.Errorf("controller add: %w", err)
	}
	fmt.Fprintf(w, "pinned controller %s (uid %d)\n", ControllerName, uid)
	return nil
}

// fundPurse funds the purse once, on first start: a later start finds it
// funded and leaves the balance as the journal says.
func fundPurse(st *operator.Store, w io.Writer) error {
	p, err := st.PurseShow(ControllerName)
	if err != nil {
		return fmt.Errorf("purse show: %w", err)
	}
	if p.Funded > 0 {
		return nil
	}
	if _, err := st.FundPurse(ControllerName, InitialFunds); err != nil {
		return fmt.Errorf("purse fund: %w", err)
	}
	fmt.Fprintf(w, "funded purse %s with %d credits\n", ControllerName, InitialFunds)
	return nil
}

// ensureGrant issues the dev grant unless a live, unrevoked one for the
// reference application exists.
func ensureGrant(st *operator.Store, w io.Writer) error {
	now := time.Now()
	for _, g := range st.Grants() {
		if g.Controller != ControllerName || g.Application != Application || g.Revoked {
			continue
		}
		notAfter, err := time.Parse(time.RFC3339Nano, g.NotAfter)
		if err == nil && now.Before(notAfter) {
			return nil
		}
	}
	g, err := st.IssueGrant(views.GrantSpec{
		Controller:  ControllerName,
		Application: Application,
		Price:       Price,
		PerDay:      PerDay,
		NotAfter:    now.Add(GrantLifetime),
	})
	if err != nil {
		return fmt.Errorf("grant issue: %w", err)
	}
	fmt.Fprintf(w, "issued grant %s: %s may call %s at %d credit a call, %d calls a day, until %s\n",
		g.ID, ControllerName, Application, Price, PerDay, g.NotAfter)
	return nil
}

// ensureRoute registers the route on first start, and on later starts
// checks that the selected route still names this layout's sockets: a state
// directory that was moved would not (the route record is signed with the
// old paths, and the controller's journal is bound to the old config).
func ensureRoute(st *operator.Store, l Layout, w io.Writer) error {
	req := views.RouteRequest{
		Controller: ControllerName,
		Upstream:   l.ApplianceSocket,
		Forward:    l.ForwardSocket,
		Reverse:    l.ReverseSocket,
		Prefix:     "/v1",
		Timeouts:   routeTimeouts,
	}
	for _, r := range st.Routes() {
		if r.Route != RouteName {
			continue
		}
		if r.Upstream != req.Upstream || r.Forward != req.Forward || r.Reverse != req.Reverse ||
			r.Controller != req.Controller || r.Application != Application {
			return fmt.Errorf("route %s names the sockets of %s, not of %s: the state directory was moved or changed; move it back or use a fresh --state",
				RouteName, filepath.Dir(r.Forward), l.Run)
		}
		return nil
	}
	v, err := st.RegisterRoute(RouteName, Application, req)
	if err != nil {
		return fmt.Errorf("route register: %w", err)
	}
	fmt.Fprintf(w, "registered route %s revision %d: host %s -> appliance %s\n", v.Route, v.Revision, v.Forward, v.Upstream)
	b, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteAtomic(l.RouteRequest, append(b, '\n'), 0o600)
}

// controllerConfig is the dev controller's config (package controller's
// shape): every UID is the current user's, in dev mode.
func controllerConfig(l Layout, uid uint32) ([]byte, error) {
	cfg := controller.Config{
		Name:     ControllerName,
		StateDir: l.Controller,
		KeyDir:   l.ControllerKey,
		Bundle:   l.Bundle,
		Sockets: controller.Sockets{
			MCP:        l.MCPSocket,
			Reverse:    l.ReverseSocket,
			Foreground: l.ForegroundSocket,
			MCPHTTP:    l.MCPHTTPSocket,
		},
		Agents:         controller.Agents{UIDs: []uint32{uid}, GIDs: []uint32{}},
		ForegroundUIDs: []uint32{uid},
		// The dev user is the operator and the agent at once: its
		// foreground calls (steward-dev's own) spend as its MCP calls do.
		Payer: &controller.Payer{MaxPerCall: PayerMaxPerCall, PerDay: PayerPerDay,
			ForegroundAllowance: &controller.PayerLimits{MaxPerCall: PayerMaxPerCall, PerDay: PayerPerDay}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if _, err := controller.ParseConfig(b); err != nil {
		return nil, err
	}
	return b, nil
}

// writeConfig writes the controller config on first start. A later start
// must compute the same bytes: the controller's journal is bound to them,
// and a different config needs an enrollment the dev mode does not do.
func writeConfig(l Layout, uid uint32, w io.Writer) error {
	want, err := controllerConfig(l, uid)
	if err != nil {
		return err
	}
	have, err := os.ReadFile(l.Config)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := durable.WriteAtomic(l.Config, want, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote the controller config %s\n", l.Config)
		return nil
	case err != nil:
		return err
	case !bytes.Equal(have, want):
		if text := httpToggled(l, uid, have); text != "" {
			return errors.New(text)
		}
		return fmt.Errorf("%s differs from the config this start computes: the state directory was moved or changed, and the controller's journal is bound to the old config; move it back or use a fresh --state", l.Config)
	}
	return nil
}

// httpToggled says what changed when the config on disk (have) is the one
// this start would compute with streamable HTTP the other way round
// (Options.MCPHTTP), and "" otherwise: that is a start's flag, not a moved
// state directory, and is told so.
func httpToggled(l Layout, uid uint32, have []byte) string {
	other, was := l.WithMCPHTTP(), "on"
	if l.MCPHTTPSocket != "" {
		other.MCPHTTPSocket, was = "", "off"
	}
	if b, err := controllerConfig(other, uid); err != nil || !bytes.Equal(have, b) {
		return ""
	}
	return fmt.Sprintf("this state was provisioned with streamable HTTP %s (Options.MCPHTTP); start it the same way or remove the state directory %s", was, l.State)
}
