package durable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/umasktest"
)

// TestModeWhateverTheUmask: each file has exactly the mode asked for,
// under a umask that would open it up (0) and one that would take bits
// away (077); WriteAtomic replaces an older file's looser mode.
func TestModeWhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0o000, 0o077} {
		umasktest.Under(t, mask, func(t *testing.T) {
			dir := t.TempDir()
			old := filepath.Join(dir, "host.bundle")
			if err := os.WriteFile(old, []byte("old"), 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(old, 0o666); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name  string
				write func(path string, b []byte, mode os.FileMode) error
				mode  os.FileMode
			}{
				{"host.bundle", WriteAtomic, 0o600},
				{"config.json", WriteAtomic, 0o600},
				{"public.json", WriteAtomic, 0o644},
				{"secret.key", WriteNew, 0o600},
				{"operator.pub", WriteNew, 0o644},
			} {
				path := filepath.Join(dir, c.name)
				if err := c.write(path, []byte("new"), c.mode); err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(path)
				if err != nil || fi.Mode() != c.mode {
					t.Errorf("umask %04o: %s: mode %v, %v; want %v", mask, c.name, fi.Mode(), err, c.mode)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 5 {
				t.Errorf("directory holds %v, want only the five files", entries)
			}
		})
	}
}
