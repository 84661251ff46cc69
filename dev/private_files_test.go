package dev

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/umasktest"
)

// TestPrivateFilesUnderUmask0: what a first start writes in its state
// directory under umask 0 (the operator store, the controller's keys,
// bundle and config, the route request, dev.json) is 0600 files in 0700
// directories, but for the two public keys. (The sockets' directory is
// ensureSocketDir's, chmod'ed to 0700 and checked on every start.)
func TestPrivateFilesUnderUmask0(t *testing.T) {
	umasktest.Under(t, 0, func(t *testing.T) {
		// t.TempDir's own directories are 0777 under umask 0; what the dev
		// mode makes in them is checked.
		l, err := NewLayout(filepath.Join(t.TempDir(), "s"))
		if err != nil {
			t.Fatal(err)
		}
		if err := provision(l, io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := l.writeManifest(); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{l.Bundle, l.Config, l.RouteRequest, l.ManifestPath()} {
			if _, err := os.Lstat(p); err != nil {
				t.Fatalf("provision wrote no %s: %v", p, err)
			}
		}
		umasktest.CheckPrivate(t, l.State, map[string]os.FileMode{
			"operator/operator.pub":          0o644,
			"controller/keys/controller.pub": 0o644,
		})
	})
}
