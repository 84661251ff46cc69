package installer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadPrivateFile reads a small tool request and one at the size
// bound, with every check.
func BenchmarkReadPrivateFile(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"1KiB", 1 << 10}, {"256KiB", ToolRequestLimit}} {
		b.Run(c.name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "requests")
			if err := os.Mkdir(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			p := filepath.Join(dir, "req")
			if err := os.WriteFile(p, bytes.Repeat([]byte("r"), c.size), 0o600); err != nil {
				b.Fatal(err)
			}
			uid := uint32(os.Geteuid())
			b.SetBytes(int64(c.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := ReadPrivateFile(p, uid, ToolRequestLimit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
