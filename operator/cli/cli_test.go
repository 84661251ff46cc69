package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

func TestCommandLine(t *testing.T) {
	dir := peertest.ShortDir(t)
	store := filepath.Join(dir, "store")
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := hosttest.RunCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	must("init", "--store", store)
	if code, _, errs := hosttest.RunCLI("init", "--store", store); code != cli.ExitRefused || !strings.Contains(errs, "already exists") {
		t.Fatalf("second init: %d %s", code, errs)
	}
	if st, err := os.Stat(store); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("store mode %v %v", st.Mode(), err)
	}
	p := peertest.NewPeer(t, "ctl")
	keys := filepath.Join(dir, "controller.pub")
	os.WriteFile(keys, p.KeysFile(), 0o644)
	must("controller", "add", "ctl", "--uid", "0", "--keys", keys, "--control", "/run/steward/host/control-ctl.sock", "--store", store)
	must("purse", "fund", "ctl", "25", "--store", store)
	id := strings.TrimSpace(must("grant", "issue", "--controller", "ctl", "--application", "app", "--operations", "calc.*",
		"--operations", "units.convert", "--price", "3", "--per-day", "10", "--not-after", "+24h", "--store", store))
	req := views.RouteRequest{Controller: "ctl", Upstream: dir + "/app.sock", Forward: dir + "/fwd.sock", Reverse: dir + "/rev.sock",
		Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 500, ResponseMs: 2000}}
	b, _ := json.Marshal(req)
	os.WriteFile(dir+"/route.json", b, 0o600)
	must("route", "register", "r1", "app", dir+"/route.json", "--store", store)
	var grants []views.GrantView
	json.Unmarshal([]byte(must("grant", "list", "--store", store, "--json")), &grants)
	if len(grants) != 1 || grants[0].ID != id || strings.Join(grants[0].Operations, ",") != "calc.*,units.convert" {
		t.Fatalf("grants %+v", grants)
	}
	var routes []views.RouteView
	json.Unmarshal([]byte(must("route", "show", "r1", "--store", store, "--json")), &routes)
	if len(routes) != 1 || routes[0].Forward != req.Forward || routes[0].Timeouts.ResponseMs != 2000 {
		t.Fatalf("routes %+v", routes)
	}
	var purse views.PurseView
	json.Unmarshal([]byte(must("purse", "show", "ctl", "--store", store, "--json")), &purse)
	if purse.Balance != 25 {
		t.Fatalf("purse %+v", purse)
	}
	must("bundle", "build", "ctl", "--out", dir+"/bundle.cbor", "--store", store)
	bb, _ := os.ReadFile(dir + "/bundle.cbor")
	if _, _, rs, err := msg.OpenBundle(bb); err != nil || len(rs) != 1 {
		t.Fatalf("bundle: %v", err)
	}
	if out := must("receipts", "verify", "--store", store); !strings.Contains(out, "0 receipts verified") {
		t.Fatalf("verify: %s", out)
	}
	if out := must("journal", "inspect", "--store", store, "--json"); !strings.Contains(out, "steward-host-journal-v1") {
		t.Fatalf("inspect: %s", out)
	}
	must("grant", "revoke", id, "--store", store)
	// refusals and usage: exit 2, one line
	for _, args := range [][]string{
		{"grant", "revoke", id, "--store", store},
		{"purse", "fund", "ctl", "x", "--store", store},
		{"purse", "fund", "ctl", "--store", store},
		{"route", "register", "r1", "app", dir + "/route.json", "--store", store},
		{"nonsense"},
		{"purse", "show", "ctl"},
	} {
		code, _, errs := hosttest.RunCLI(args...)
		if code != cli.ExitRefused || strings.Count(strings.TrimSpace(errs), "\n") != 0 && args[0] != "nonsense" {
			t.Fatalf("%v: exit %d: %q", args, code, errs)
		}
	}
	if code, _, _ := hosttest.RunCLI("grant", "issue", "--help"); code != 0 {
		t.Fatal("--help")
	}
}
