package journal

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// history100k builds, on the real disk, a journal of 100,000 records
// (256-byte bodies, appended from 64 goroutines, 64 MiB segments) and
// returns its directory, every record's place and the marks 1,000
// records before the end and at the end.
func history100k(b *testing.B) (string, []Place, Mark, Mark) {
	b.Helper()
	dir := filepath.Join(benchDir(b), "j")
	opts := Options{Owner: testOwner, Format: testFormat}
	j, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody()
	const n, writers = 100000, 64
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := g; i < n-1-1000; i += writers {
				if _, err := j.Append("bench", body); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for j.LastSeq() < n-1000 {
		if _, err := j.Append("bench", body); err != nil {
			b.Fatal(err)
		}
	}
	before := j.Mark()
	for j.LastSeq() < n {
		if _, err := j.Append("bench", body); err != nil {
			b.Fatal(err)
		}
	}
	end := j.Mark()
	places := make([]Place, 0, n)
	if err := j.Iterate(1, func(r Record) error { places = append(places, r.Place); return nil }); err != nil {
		b.Fatal(err)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, places, before, end
}

// BenchmarkStartFromMark measures what a daemon's start costs on a journal
// of 100,000 records: today's (Open, then Iterate every record), Open in
// full with OnRecord (each record decoded once), Open from a mark 1,000
// records before the end with OnRecord (a snapshot taken a little while
// ago), Open from the mark at the end; and ReadAt of the oldest record
// and of random ones, with the segment in the page cache and dropped from
// it (posix_fadvise DONTNEED, outside the timer). The kinds run in turn,
// three rounds, and the ratios of their means are logged.
func BenchmarkStartFromMark(b *testing.B) {
	dir, places, before, end := history100k(b)
	opts := Options{Owner: testOwner, Format: testFormat}
	open := func(b *testing.B, o Options) *Journal {
		j, err := Open(dir, o)
		if err != nil {
			b.Fatal(err)
		}
		return j
	}
	count := func(n *int) func(Record) error { return func(Record) error { *n++; return nil } }
	kinds := []struct {
		name string
		run  func(b *testing.B)
	}{
		{"open-then-iterate", func(b *testing.B) {
			j := open(b, opts)
			n := 0
			if err := j.Iterate(1, count(&n)); err != nil || n != len(places) {
				b.Fatalf("iterated %d: %v", n, err)
			}
			j.Close()
		}},
		{"open-onrecord", func(b *testing.B) {
			n := 0
			o := opts
			o.OnRecord = count(&n)
			open(b, o).Close()
		}},
		{"from-1000-before-end-onrecord", func(b *testing.B) {
			n := 0
			o := opts
			o.From, o.OnRecord = &before, count(&n)
			open(b, o).Close()
			if n != 1000 {
				b.Fatalf("OnRecord got %d records after the mark", n)
			}
		}},
		{"from-end", func(b *testing.B) {
			o := opts
			o.From = &end
			open(b, o).Close()
		}},
	}
	means := map[string]time.Duration{}
	var mu sync.Mutex
	for round := 1; round <= 3; round++ {
		for _, k := range kinds {
			b.Run(fmt.Sprintf("round=%d/%s", round, k.name), func(b *testing.B) {
				for b.Loop() {
					k.run(b)
				}
				mu.Lock()
				means[k.name] += b.Elapsed() / time.Duration(b.N) / 3
				mu.Unlock()
			})
		}
		benchReadAt(b, dir, places, round, means, &mu)
	}
	base := means["open-then-iterate"]
	for _, k := range kinds {
		b.Logf("%-32s %12v  today's start / this = %.1f", k.name, means[k.name], float64(base)/float64(means[k.name]))
	}
	for _, k := range []string{"readat-oldest", "readat-random", "readat-cold"} {
		b.Logf("%-32s %12v", k, means[k])
	}
}

// benchReadAt runs the ReadAt kinds of one round of BenchmarkStartFromMark.
func benchReadAt(b *testing.B, dir string, places []Place, round int, means map[string]time.Duration, mu *sync.Mutex) {
	j, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	seg, err := os.Open(filepath.Join(dir, segName(1)))
	if err != nil {
		b.Fatal(err)
	}
	defer seg.Close()
	r := rand.New(rand.NewPCG(1, uint64(round)))
	for _, k := range []struct {
		name string
		pick func() Place
		cold bool
	}{
		{"readat-oldest", func() Place { return places[1] }, false},
		{"readat-random", func() Place { return places[r.IntN(len(places))] }, false},
		{"readat-cold", func() Place { return places[r.IntN(len(places))] }, true},
	} {
		b.Run(fmt.Sprintf("round=%d/%s", round, k.name), func(b *testing.B) {
			for b.Loop() {
				p := k.pick()
				if k.cold {
					b.StopTimer()
					if err := unix.Fadvise(int(seg.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if rec, err := j.ReadAt(p); err != nil || rec.Seq != p.Seq {
					b.Fatalf("ReadAt(%+v): %v", p, err)
				}
			}
			mu.Lock()
			means[k.name] += b.Elapsed() / time.Duration(b.N) / 3
			mu.Unlock()
		})
	}
}
