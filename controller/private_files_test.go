package controller

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/umasktest"
)

// TestPrivateFilesUnderUmask0: under umask 0, `keys init` makes its
// directory 0700 and the four role keys 0600 (controller.pub, which the
// operator pins, is 0644), and a serving controller's state directory and
// journal, and the host's store beside it, are 0600 files in 0700
// directories.
func TestPrivateFilesUnderUmask0(t *testing.T) {
	umasktest.Under(t, 0, func(t *testing.T) {
		keys := filepath.Join(t.TempDir(), "a", "keys")
		if code, _, stderr := runCLI("keys", "init", "--dir", keys); code != ExitOK {
			t.Fatalf("keys init: exit %d: %s", code, stderr)
		}
		umasktest.CheckPrivate(t, filepath.Dir(keys), map[string]os.FileMode{"keys/" + PublicKeysFile: 0o644})

		s := newStack(t, stackOpts{})
		s.startController()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, res := call(t, ctx, s.client(ctx), ToolOverview, map[string]any{}); res.IsError {
			t.Fatalf("overview: %+v", res)
		}
		s.stop()
		umasktest.CheckPrivate(t, s.cfg.StateDir, nil)
		umasktest.CheckPrivate(t, s.cfg.KeyDir, map[string]os.FileMode{PublicKeysFile: 0o644})
		umasktest.CheckPrivate(t, s.store, map[string]os.FileMode{"operator.pub": 0o644})
	})
}
