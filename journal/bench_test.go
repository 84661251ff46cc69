package journal

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const tmpfsMagic = 0x01021994

// benchDir returns a directory on the real disk: fsync on tmpfs measures nothing.
func benchDir(b *testing.B) string {
	b.Helper()
	d := b.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		b.Fatal(err)
	}
	if st.Type == tmpfsMagic {
		b.Skipf("%s is on tmpfs; set TMPDIR to a directory on a real disk", d)
	}
	return d
}

func benchBody() []byte {
	body := make([]byte, 256)
	rand.Read(body)
	return body
}

// BenchmarkAppend appends 256-byte bodies from 1, 8 and 64 goroutines; each
// op is one acknowledged (fdatasync'd) record.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchAppend(b, writers) })
	}
}

// BenchmarkAppendWatermark is BenchmarkAppend for 1 and 64 writers with
// the watermark rewritten after every fdatasync (as always) and without
// (watermarkOff), in three rounds of on and off in turn, so that a drift
// of the disk's speed during the run hits both alike.
func BenchmarkAppendWatermark(b *testing.B) {
	for _, writers := range []int{1, 64} {
		for round := 1; round <= 3; round++ {
			for _, wm := range []string{"on", "off"} {
				b.Run(fmt.Sprintf("writers=%d/round=%d/watermark=%s", writers, round, wm), func(b *testing.B) {
					watermarkOff = wm == "off"
					defer func() { watermarkOff = false }()
					benchAppend(b, writers)
				})
			}
		}
	}
}

func benchAppend(b *testing.B, writers int) {
	j, err := Open(filepath.Join(benchDir(b), "j"), Options{Owner: testOwner, Format: testFormat})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	body := benchBody()
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := j.Append("bench", body); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkNaiveAppendFdatasync is the floor a journal is measured against:
// write+fdatasync of a frame of the same size (a 256-byte body) to a plain
// O_APPEND file that grows with every write.
func BenchmarkNaiveAppendFdatasync(b *testing.B) {
	var prev [32]byte
	body, _ := encMode.Marshal(benchBody())
	frame := make([]byte, headerSize)
	frame = appendPayload(frame, 1000, &prev, "bench", time.Now().UnixMilli(), body)
	putHeader(frame, frame[headerSize:])
	f, err := os.OpenFile(filepath.Join(benchDir(b), "naive"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	b.ResetTimer()
	for range b.N {
		if _, err := unix.Write(fd, frame); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppendPayload: the hand-written record encoder alone, no I/O,
// for a 256-byte body: the CPU an append spends framing its record, which
// the fdatasync of BenchmarkAppend hides.
func BenchmarkAppendPayload(b *testing.B) {
	var prev [hashSize]byte
	body, err := encMode.Marshal(benchBody())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendPayload(buf[:0], 123456, &prev, "bench", 1700000000000, body)
	}
}

// BenchmarkWatermarkWrite is the rewrite of the watermark alone (one
// pwrite of 32 bytes in place), what every batch pays for it on top of
// its write and fdatasync.
func BenchmarkWatermarkWrite(b *testing.B) {
	var wf watermarkFile
	wf.open(b.TempDir(), watermark{}, slog.Default())
	defer wf.close()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		wf.write(watermark{Seq: uint64(i) + 1, Segment: 1, End: int64(i)*100 + 100}, slog.Default())
	}
}
