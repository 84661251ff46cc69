package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/umasktest"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// TestPrivateFilesUnderUmask0 runs the verbs that write files under umask
// 0: the store (key, journal) is 0600 files in 0700 directories but for
// operator.pub, and the bundle and receipts export are 0600 even where an
// older file at --out was world-readable. `steward-installer
// bundle-install` takes nothing but a 0600 bundle.
func TestPrivateFilesUnderUmask0(t *testing.T) {
	umasktest.Under(t, 0, func(t *testing.T) {
		dir := peertest.ShortDir(t)
		store := filepath.Join(dir, "store")
		must := func(args ...string) {
			t.Helper()
			if code, _, errs := hosttest.RunCLI(args...); code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, errs)
			}
		}
		must("init", "--store", store)
		keys := filepath.Join(dir, "controller.pub")
		if err := os.WriteFile(keys, peertest.NewPeer(t, "ctl").KeysFile(), 0o644); err != nil {
			t.Fatal(err)
		}
		must("controller", "add", "ctl", "--uid", "0", "--keys", keys, "--control", "/run/steward/host/control-ctl.sock", "--store", store)
		must("purse", "fund", "ctl", "25", "--store", store)
		must("grant", "issue", "--controller", "ctl", "--application", "app", "--operations", "calc.*",
			"--price", "3", "--per-day", "10", "--not-after", "+24h", "--store", store)
		b, _ := json.Marshal(views.RouteRequest{Controller: "ctl", Upstream: dir + "/app.sock", Forward: dir + "/fwd.sock",
			Reverse: dir + "/rev.sock", Prefix: "/v1", Timeouts: msg.Timeouts{ConnectMs: 500, ResponseMs: 2000}})
		if err := os.WriteFile(dir+"/route.json", b, 0o600); err != nil {
			t.Fatal(err)
		}
		must("route", "register", "r1", "app", dir+"/route.json", "--store", store)

		out := filepath.Join(dir, "out")
		if err := os.Mkdir(out, 0o700); err != nil {
			t.Fatal(err)
		}
		bundle, receipts := filepath.Join(out, "host.bundle"), filepath.Join(out, "receipts.cbor")
		// An older bundle, world-readable: build replaces it, mode and all.
		if err := os.WriteFile(bundle, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		must("bundle", "build", "ctl", "--out", bundle, "--store", store)
		must("receipts", "export", "--store", store, "--out", receipts)
		if bb, _ := os.ReadFile(bundle); len(bb) < 4 || string(bb) == "old" {
			t.Fatal("bundle build did not replace the older file")
		}
		umasktest.CheckPrivate(t, out, nil)
		umasktest.CheckPrivate(t, store, map[string]os.FileMode{hostlog.PubFile: 0o644})
	})
}
