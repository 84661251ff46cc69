package snapshot

import (
	"bytes"
	"path/filepath"
	"testing"
)

// BenchmarkWrite1MiB: one op is a signed Write of a 1 MiB state: encode,
// sign, write, fsync, rename, directory fsync and pruning to Keep.
func BenchmarkWrite1MiB(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "snap")
	s := snap(1)
	s.State = bytes.Repeat([]byte{1}, 1<<20)
	b.SetBytes(int64(len(s.State)))
	for b.Loop() {
		s.Mark = mark(s.Mark.Seq + 1)
		if _, err := Write(dir, s, sign); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad1MiB: one op is a Load of a signed 1 MiB snapshot: read,
// strict decoding, the deterministic-encoding checks, SHA-256 and the
// signature's verification.
func BenchmarkLoad1MiB(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "snap")
	s := snap(1)
	s.State = bytes.Repeat([]byte{1}, 1<<20)
	if _, err := Write(dir, s, sign); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(s.State)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(dir, testFormat, verify, nil); err != nil {
			b.Fatal(err)
		}
	}
}
