package index

import (
	"bufio"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// benchEntries is the size of the index the Get benchmarks read.
const benchEntries = 1_000_000

var (
	benchOnce sync.Once
	benchDir  string // removed by TestMain
	benchPath string
	benchErr  error
)

// bigIndex builds, once per process, an index of benchEntries SeqKey
// entries with place values, synced and closed, and returns its path.
func bigIndex(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "index-bench-")
		if benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "idx", "history.db")
		x, err := Open(benchPath, Options{Logger: quiet})
		if err != nil {
			benchErr = err
			return
		}
		for i := range benchEntries {
			if err := x.Put("b", SeqKey(uint64(i)), value(i)); err != nil {
				benchErr = err
				return
			}
		}
		benchErr = x.Close()
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}

// BenchmarkPutFlush1000: one op is 1,000 Puts and the Flush that writes
// them, without fsync, into an index that grows as the benchmark runs.
func BenchmarkPutFlush1000(b *testing.B) {
	x, _ := open(b)
	seq := 0
	b.ReportAllocs()
	for b.Loop() {
		for range 1000 {
			if err := x.Put("b", SeqKey(uint64(seq)), value(seq)); err != nil {
				b.Fatal(err)
			}
			seq++
		}
		if err := x.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/entry")
}

// BenchmarkPutFlush1000Random: the same with random 16-byte keys (the
// shape of requestIds), inserted all over the tree.
func BenchmarkPutFlush1000Random(b *testing.B) {
	x, _ := open(b)
	r := rand.New(rand.NewPCG(5, 6))
	key := make([]byte, 16)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for range 1000 {
			binary.BigEndian.PutUint64(key, r.Uint64())
			binary.BigEndian.PutUint64(key[8:], r.Uint64())
			if err := x.Put("b", key, value(n)); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := x.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/entry")
}

// BenchmarkSync: one op is a Put and a Sync: the flush, the marker made
// durable, the file's fdatasync, the marker removed and the directory
// fsync'd: what an owner pays once per snapshot.
func BenchmarkSync(b *testing.B) {
	x, _ := open(b)
	seq := 0
	for b.Loop() {
		if err := x.Put("b", SeqKey(uint64(seq)), value(seq)); err != nil {
			b.Fatal(err)
		}
		seq++
		if err := x.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet1M: a Get of a random key of an index of a million
// entries, every key in the file (nothing held).
func BenchmarkGet1M(b *testing.B) {
	x := reopen(b, bigIndex(b))
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		i := r.IntN(benchEntries)
		if _, ok, err := x.Get("b", SeqKey(uint64(i))); !ok || err != nil {
			b.Fatalf("Get %d: %v %v", i, ok, err)
		}
	}
}

// BenchmarkGetRSS: what a Get-heavy loop (random Gets over the million
// entries) adds to the process's resident memory, anonymous (the Go
// heap: copies, garbage) and file-backed (bbolt's mmap'd pages, which
// the kernel can drop: page cache, not the daemon's own memory).
func BenchmarkGetRSS(b *testing.B) {
	x := reopen(b, bigIndex(b))
	r := rand.New(rand.NewPCG(3, 4))
	runtime.GC()
	anon0, file0 := rss(b)
	for b.Loop() {
		i := r.IntN(benchEntries)
		if _, ok, err := x.Get("b", SeqKey(uint64(i))); !ok || err != nil {
			b.Fatalf("Get %d: %v %v", i, ok, err)
		}
	}
	anon1, file1 := rss(b)
	b.ReportMetric(float64(anon1-anon0), "anon-KiB-added")
	b.ReportMetric(float64(file1-file0), "file-KiB-added")
	fi, err := os.Stat(x.Path())
	if err == nil {
		b.ReportMetric(float64(fi.Size()>>10), "file-KiB")
	}
}

// rss reads RssAnon and RssFile (KiB) from /proc/self/status.
func rss(b *testing.B) (anon, file int64) {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "RssAnon":
			anon = n
		case "RssFile":
			file = n
		}
	}
	return anon, file
}
