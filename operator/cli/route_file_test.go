package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestRouteRequestPrivate: `route register` takes a route request only
// from a regular file of the operator's account, 0600 or stricter, under
// directories no other account can change. Each other file (readable by
// the group, by the world, a symlink, in a group-writable directory,
// another account's) is refused, exit 2, one line naming the file and
// why, and nothing is journaled; the same request at 0600 registers.
func TestRouteRequestPrivate(t *testing.T) {
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
	keys := filepath.Join(dir, "controller.pub")
	if err := os.WriteFile(keys, peertest.NewPeer(t, "ctl").KeysFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	must("controller", "add", "ctl", "--uid", "0", "--keys", keys, "--control", "/run/steward/host/control-ctl.sock", "--store", store)
	b, _ := json.Marshal(views.RouteRequest{Controller: "ctl", Upstream: dir + "/app.sock", Forward: dir + "/fwd.sock",
		Reverse: dir + "/rev.sock", Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 500, ResponseMs: 2000}})
	write := func(p string, mode os.FileMode) string {
		t.Helper()
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write(filepath.Join(dir, "route.json"), 0o600)
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	inShared := write(filepath.Join(shared, "route.json"), 0o600)
	if err := os.Chmod(shared, 0o775); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, why string }{
		{write(filepath.Join(dir, "world.json"), 0o644), "has mode 0644: other accounts may read or change it (want 0600 or stricter: chmod 600)"},
		{write(filepath.Join(dir, "group.json"), 0o640), "has mode 0640: other accounts may read or change it (want 0600 or stricter: chmod 600)"},
		{link, "is a symlink"},
		{inShared, fmt.Sprintf("ancestor %s is group-writable (mode 0775) and not a root-owned sticky directory", shared)},
	}
	if os.Geteuid() == 0 {
		other := write(filepath.Join(dir, "other.json"), 0o600)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ path, why string }{other, "is owned by uid 65534, not by this account (uid 0)"})
	}
	records := func() uint64 {
		var s struct {
			LastSeq uint64 `json:"last_seq"`
		}
		if err := json.Unmarshal([]byte(must("journal", "inspect", "--store", store, "--json")), &s); err != nil || s.LastSeq == 0 {
			t.Fatalf("journal inspect: %v", err)
		}
		return s.LastSeq
	}
	before := records()
	for _, c := range cases {
		code, out, errs := hosttest.RunCLI("route", "register", "r1", "app", c.path, "--store", store)
		want := fmt.Sprintf("steward-operator route register: refused: route request %s %s\n", c.path, c.why)
		if code != cli.ExitRefused || out != "" || errs != want {
			t.Errorf("route register %s: exit %d, stdout %q, stderr %q; want exit 2, %q", c.path, code, out, errs, want)
		}
	}
	if after := records(); after != before {
		t.Fatalf("the refusals journaled %d records", after-before)
	}
	must("route", "register", "r1", "app", ok, "--store", store)
	if records() == before {
		t.Fatal("the 0600 request journaled nothing")
	}
}
