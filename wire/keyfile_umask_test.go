package wire

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/internal/umasktest"
)

// TestKeyFileModesWhateverTheUmask: key files and the directories made for
// them have exactly their kind's modes under a umask that would open them
// up (0) and one that would take bits away (077), and read back.
func TestKeyFileModesWhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0o000, 0o077} {
		umasktest.Under(t, mask, func(t *testing.T) {
			dir := t.TempDir()
			k, err := GenerateSigningKey()
			if err != nil {
				t.Fatal(err)
			}
			h, err := GenerateHybridKey()
			if err != nil {
				t.Fatal(err)
			}
			priv, hybrid := filepath.Join(dir, "keys", "tool.key"), filepath.Join(dir, "keys", "operator.key")
			pub := filepath.Join(dir, "pinned", "host.pub")
			if err := WriteSigningKey(priv, k); err != nil {
				t.Fatal(err)
			}
			if err := WriteHybridKey(hybrid, h); err != nil {
				t.Fatal(err)
			}
			if err := WritePublicKeyFile(pub, k.Public()); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]os.FileMode{
				filepath.Dir(priv): os.ModeDir | 0o700, priv: 0o600, hybrid: 0o600,
				filepath.Dir(pub): os.ModeDir | 0o755, pub: 0o644,
			} {
				if fi, err := os.Lstat(path); err != nil || fi.Mode() != want {
					t.Errorf("umask %04o: %s: %v, %v; want %v", mask, path, fi.Mode(), err, want)
				}
			}
			if _, err := ReadSigningKey(priv); err != nil {
				t.Error(err)
			}
			if _, err := ReadHybridKey(hybrid); err != nil {
				t.Error(err)
			}
			if _, err := ReadPublicKeyFile(pub); err != nil {
				t.Error(err)
			}
		})
	}
}
