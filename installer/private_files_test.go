package installer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/umasktest"
)

// TestInstallModesUnderUmask0: under umask 0, what install writes has
// exactly the modes status checks (the state directories 0700, the
// sudoers drop-in 0440).
func TestInstallModesUnderUmask0(t *testing.T) {
	umasktest.Under(t, 0, func(t *testing.T) {
		root := installTree(t)
		if code, out, errs := run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin); code != ExitOK {
			t.Fatalf("status after an install under umask 0: exit %d\n%s%s", code, out, errs)
		}
	})
}

// TestBundleInstallUnderUmask0: under umask 0, the bundle bundle-install
// writes for the controller is 0600, replacing an older world-readable one.
func TestBundleInstallUnderUmask0(t *testing.T) {
	umasktest.Under(t, 0, func(t *testing.T) {
		f := newCtlFixture(t, "ctl")
		f.install(t, f.configBytes(t))
		if err := os.WriteFile(f.cfg.Bundle, []byte("an older bundle"), 0o644); err != nil {
			t.Fatal(err)
		}
		// Not writeOperatorFile: under umask 0 the directories t.TempDir
		// makes are 0777, which bundle-install rightly refuses to read from.
		dir, err := os.MkdirTemp("", "stw-op")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		chown(t, dir, operatorUID())
		src := filepath.Join(dir, "host.bundle")
		if err := os.WriteFile(src, makeBundle(t, "ctl"), 0o600); err != nil {
			t.Fatal(err)
		}
		chown(t, src, operatorUID())
		if code, out, errs := run(t, f.env, "controller-pin-host", src); code != ExitOK {
			t.Fatalf("controller-pin-host: exit %d\n%s%s", code, out, errs)
		}
		if code, out, errs := run(t, f.env, "bundle-install", src); code != ExitOK {
			t.Fatalf("bundle-install: exit %d\n%s%s", code, out, errs)
		}
		if m := modeOf(t, f.cfg.Bundle); m != bundleMode {
			t.Fatalf("installed bundle: mode %04o, want %04o", m, bundleMode)
		}
	})
}
