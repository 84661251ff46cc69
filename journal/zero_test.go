package journal

import "testing"

// TestNonZeroScans checks the block-wise zero scans against a byte loop at
// every position around block edges.
func TestNonZeroScans(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 17} {
		b := make([]byte, size)
		if got := firstNonZeroIn(b); got != -1 {
			t.Fatalf("size %d all zero: firstNonZeroIn = %d", size, got)
		}
		if got := lastNonZeroIn(b); got != -1 {
			t.Fatalf("size %d all zero: lastNonZeroIn = %d", size, got)
		}
		for _, at := range []int{0, 1, 4095, 4096, 4097, size - 1} {
			if at < 0 || at >= size {
				continue
			}
			b[at] = 9
			if got := firstNonZeroIn(b); got != at {
				t.Errorf("size %d, byte at %d: firstNonZeroIn = %d", size, at, got)
			}
			if got := lastNonZeroIn(b); got != at {
				t.Errorf("size %d, byte at %d: lastNonZeroIn = %d", size, at, got)
			}
			b[at] = 0
		}
	}
}

// BenchmarkScanZeroSegment is the cost of finding the end of a 64 MiB
// preallocated segment in memory.
func BenchmarkScanZeroSegment(b *testing.B) {
	seg := make([]byte, DefaultSegmentSize)
	b.SetBytes(int64(len(seg)))
	for b.Loop() {
		if firstNonZeroIn(seg) != -1 {
			b.Fatal("non-zero")
		}
	}
}
