package controller

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// testBundle signs a bundle for controller name with one route per app,
// route name = "r-"+app, and a control socket in dir, with a fresh
// operator key.
func testBundle(t *testing.T, dir, name string, apps ...string) string {
	t.Helper()
	k, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	var routes [][]byte
	for _, a := range apps {
		r, err := msg.SignRoute(k, msg.RouteRecord{
			Route: "r-" + a, Revision: 1, Application: a, Protocol: msg.ProtocolOracleOperationsV1,
			Controller: name, Upstream: "/nonexistent/" + a + ".sock", Forward: filepath.Join(dir, a+".fwd"),
			Reverse: filepath.Join(dir, "reverse.sock"), Prefix: "/v1",
			Timeouts: msg.Timeouts{ConnectMs: 1000, ResponseMs: 5000}, IssuedAt: time.Now().UnixMilli(),
		})
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, r)
	}
	b, err := msg.SignBundle(k, msg.Bundle{Controller: name, HostKey: k.Public().MarshalCOSEKey(), HostUID: uint32(os.Getuid()), Routes: routes, IssuedAt: time.Now().UnixMilli(),
		Control: filepath.Join(dir, "control.sock")})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "host.bundle")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// baseConfig is a valid config as a generic map, for tests to break. It
// lists no application: the host's active routes are the controller's.
func baseConfig(dir, bundle string) map[string]any {
	return map[string]any{
		"name": "dev", "stateDir": filepath.Join(dir, "state"), "keyDir": filepath.Join(dir, "keys"),
		"bundle": bundle,
		"sockets": map[string]any{"mcp": filepath.Join(dir, "mcp.sock"), "reverse": filepath.Join(dir, "reverse.sock"),
			"foreground": filepath.Join(dir, "fg.sock")},
		"agents":         map[string]any{"uids": []int{os.Getuid()}, "gids": []int{}},
		"foregroundUids": []int{os.Getuid()},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConfigValid(t *testing.T) {
	dir := t.TempDir()
	b := testBundle(t, dir, "dev", "appliance")
	c, err := ParseConfig(mustJSON(t, baseConfig(dir, b)))
	if err != nil {
		t.Fatal(err)
	}
	bind, err := LoadBundle(c)
	if err != nil {
		t.Fatal(err)
	}
	if bind.Bundle.Control != filepath.Join(dir, "control.sock") {
		t.Fatalf("bundle's control socket %q", bind.Bundle.Control)
	}
	// foregroundUids absent means root and the controller's own account.
	m := baseConfig(dir, b)
	delete(m, "foregroundUids")
	c, err = ParseConfig(mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ForegroundPeers(1234); !slices.Equal(got, []uint32{0, 1234}) {
		t.Fatalf("default foregroundUids %v, want [0 1234]", got)
	}
	if got := c.ForegroundPeers(0); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("default foregroundUids as root %v, want [0]", got)
	}
}

func TestConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	b := testBundle(t, dir, "dev", "appliance", "other")
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		raw   string
		want  string
		atBun bool // refused only once the bundle is read
	}{
		{name: "unknown field", edit: func(m map[string]any) { m["colour"] = "blue" }, want: `unknown field "colour"`},
		{name: "toolTask", edit: func(m map[string]any) {
			m["toolTask"] = map[string]any{"applicationServices": []any{map[string]any{"application": "appliance", "protocol": "oracle-operations-v1"}}}
		}, want: "toolTask: no longer part of a controller config: the host's active routes are its applications; remove it and enroll the config with steward-installer controller-enroll"},
		{name: "relative path", edit: func(m map[string]any) { m["stateDir"] = "state" }, want: "stateDir"},
		{name: "same sockets", edit: func(m map[string]any) {
			m["sockets"] = map[string]any{"mcp": "/run/a.sock", "reverse": "/run/a.sock", "foreground": "/run/b.sock"}
		}, want: "sockets: mcp, reverse, foreground, mcpHTTP and advisor (the last two when set) must be different paths"},
		{name: "mcpHTTP same as mcp", edit: func(m map[string]any) {
			sk := m["sockets"].(map[string]any)
			sk["mcpHTTP"] = sk["mcp"]
		}, want: "sockets: mcp, reverse, foreground, mcpHTTP and advisor (the last two when set) must be different paths"},
		{name: "mcpHTTP relative", edit: func(m map[string]any) { m["sockets"].(map[string]any)["mcpHTTP"] = "run/mcp-http.sock" },
			want: `sockets.mcpHTTP: "run/mcp-http.sock" must be a clean absolute path`},
		{name: "advisor same as mcpHTTP", edit: func(m map[string]any) {
			sk := m["sockets"].(map[string]any)
			sk["mcpHTTP"] = "/run/x/mcp-http.sock"
			sk["advisor"] = "/run/x/mcp-http.sock"
		}, want: "sockets: mcp, reverse, foreground, mcpHTTP and advisor (the last two when set) must be different paths"},
		{name: "advisor same as mcp", edit: func(m map[string]any) {
			sk := m["sockets"].(map[string]any)
			sk["advisor"] = sk["mcp"]
		}, want: "sockets: mcp, reverse, foreground, mcpHTTP and advisor (the last two when set) must be different paths"},
		{name: "advisor relative", edit: func(m map[string]any) { m["sockets"].(map[string]any)["advisor"] = "run/advisor.sock" },
			want: `sockets.advisor: "run/advisor.sock" must be a clean absolute path`},
		{name: "advisor not clean", edit: func(m map[string]any) { m["sockets"].(map[string]any)["advisor"] = "/run/x/../advisor.sock" },
			want: `sockets.advisor: "/run/x/../advisor.sock" must be a clean absolute path`},
		{name: "mcpHTTP not clean", edit: func(m map[string]any) { m["sockets"].(map[string]any)["mcpHTTP"] = "/run/x/../mcp-http.sock" },
			want: `sockets.mcpHTTP: "/run/x/../mcp-http.sock" must be a clean absolute path`},
		{name: "trailing data", raw: "TRAIL", want: "data after the config object"},
		{name: "bundle for another controller", edit: func(m map[string]any) { m["name"] = "someone-else" },
			want: `was built for controller "dev", not "someone-else"`, atBun: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := baseConfig(dir, b)
			if tc.edit != nil {
				tc.edit(m)
			}
			raw := mustJSON(t, m)
			if tc.raw != "" {
				raw = append(raw, tc.raw...)
			}
			c, err := ParseConfig(raw)
			if tc.atBun {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				_, err = LoadBundle(c)
			}
			if err == nil {
				t.Fatalf("accepted")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want ErrConfig containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestConfigBindingMismatch(t *testing.T) {
	dir := t.TempDir()
	b := testBundle(t, dir, "dev", "appliance")
	m := baseConfig(dir, b)
	c1, err := ParseConfig(mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	raw1 := mustJSON(t, m)
	j, err := openJournal(c1, raw1, 0)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	// Same config, different key order and spacing: same binding.
	var generic map[string]any
	json.Unmarshal(raw1, &generic)
	raw1b, _ := json.MarshalIndent(generic, "", "   ")
	j, err = openJournal(c1, raw1b, 0)
	if err != nil {
		t.Fatalf("reordered config refused: %v", err)
	}
	j.Close()
	m["agents"] = map[string]any{"uids": []int{4242}, "gids": []int{}}
	raw2 := mustJSON(t, m)
	_, err = openJournal(c1, raw2, 0)
	if !errors.Is(err, ErrBinding) || !strings.Contains(err.Error(), "does not match the journal's") ||
		!strings.Contains(err.Error(), "enroll the new config with steward-installer controller-enroll") {
		t.Fatalf("err %v", err)
	}
}
