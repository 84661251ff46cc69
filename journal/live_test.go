package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

// The tests here read a journal while its owner appends to it, as the
// read-only commands (attempts list, purse show) do: a read-only Open must
// never report an error, must see every record acknowledged before it
// started, and must see nothing past the owner's watermark.

// liveWriters appends from writers goroutines, each append paid for by a
// token from budget, until stop is closed.
type liveWriters struct {
	acked    atomic.Uint64 // highest acknowledged seq
	okAfter  atomic.Int64  // appends acknowledged
	failures atomic.Int64  // appends that failed unwritten (a full disk)
	budget   chan struct{}
	stop     chan struct{}
	failed   chan struct{} // gets a value (if empty) when an append fails unwritten
	written  chan struct{} // likewise when one succeeds
	wg       sync.WaitGroup
}

func startLiveWriters(t *testing.T, j *Journal, writers, bodyBytes int) *liveWriters {
	t.Helper()
	w := &liveWriters{budget: make(chan struct{}, 1024), stop: make(chan struct{}),
		failed: make(chan struct{}, 1), written: make(chan struct{}, 1)}
	note := strings.Repeat("w", bodyBytes)
	for g := range writers {
		w.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				case <-w.budget:
				}
				seq, err := j.Append("tick", tick{N: g*1000000 + i, Note: note})
				switch {
				case errors.Is(err, ErrNotWritten) && !errors.Is(err, ErrFailed):
					w.failures.Add(1)
					signal(w.failed)
					continue
				case err != nil:
					t.Errorf("append: %v", err)
					return
				}
				w.okAfter.Add(1)
				signal(w.written)
				for {
					a := w.acked.Load()
					if seq <= a || w.acked.CompareAndSwap(a, seq) {
						break
					}
				}
			}
		})
	}
	return w
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (w *liveWriters) pay(n int) {
	for range n {
		select {
		case w.budget <- struct{}{}:
		default:
			return
		}
	}
}

func (w *liveWriters) halt() {
	close(w.stop)
	w.wg.Wait()
}

// readLive opens dir read-only rounds times and iterates it, checking
// what a reader of a live journal is promised; each round pays the
// writers for more appends.
func readLive(t *testing.T, dir string, rounds int, w *liveWriters, pay int) {
	t.Helper()
	var lastSeen uint64
	for round := range rounds {
		before := w.acked.Load()
		j, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Errorf("round %d: read-only Open of the live journal: %v", round, err)
			return
		}
		n := uint64(0)
		err = j.Iterate(1, func(r Record) error {
			n++
			if r.Seq != n {
				return errors.New("iterated out of order")
			}
			return nil
		})
		last, recs := j.LastSeq(), j.Recoveries()
		mustClose(t, j)
		wm, ok := readWatermark(dir)
		switch {
		case err != nil:
			t.Errorf("round %d: Iterate: %v", round, err)
		case n != last:
			t.Errorf("round %d: iterated %d records of %d", round, n, last)
		case !ok:
			t.Errorf("round %d: no watermark", round)
		case last > wm.Seq:
			t.Errorf("round %d: read seq %d, past the watermark at %d", round, last, wm.Seq)
		case last < before:
			t.Errorf("round %d: read seq %d, but seq %d was acknowledged before the open", round, last, before)
		case last < lastSeen:
			t.Errorf("round %d: read seq %d after seq %d", round, last, lastSeen)
		case len(recs) != 0:
			t.Errorf("round %d: a read of the live journal reports recoveries %+v", round, recs)
		}
		if t.Failed() {
			return
		}
		lastSeen = last
		w.pay(pay)
	}
}

// liveRun runs readers against writers on the journal in dir.
func liveRun(t *testing.T, dir string, opts Options, readers, rounds, writers, bodyBytes int) *liveWriters {
	t.Helper()
	j := mustOpen(t, dir, opts)
	w := startLiveWriters(t, j, writers, bodyBytes)
	w.pay(writers * 4)
	var rg sync.WaitGroup
	for range readers {
		rg.Go(func() { readLive(t, dir, rounds, w, writers) })
	}
	rg.Wait()
	w.halt()
	mustClose(t, j)
	t.Logf("%d appends acknowledged, %d failed unwritten, while %d readers opened it %d times each",
		w.okAfter.Load(), w.failures.Load(), readers, rounds)
	return w
}

func liveRounds() int {
	if raceEnabled {
		return 30
	}
	return 100
}

// TestLiveReaders: writers append large batches (24 goroutines let go at
// once, 1 KiB bodies, rotating 256 KiB segments) while two readers open
// the journal read-only and iterate it, hundreds of times in all.
func TestLiveReaders(t *testing.T) {
	opts := testOptions()
	opts.SegmentSize = 256 << 10
	liveRun(t, journalDir(t), opts, 2, liveRounds(), 24, 1024)
}

// TestLiveReadersFullDisk: the same on a small tmpfs that fills up and is
// freed again while they run, so that batches fail and what they wrote is
// removed under the readers: never a corruption report.
func TestLiveReadersFullDisk(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		name := "preallocated"
		if sparse {
			name = "sparse"
		}
		t.Run(name, func(t *testing.T) {
			if sparse {
				noFallocate(t)
			}
			disk := testenv.SmallTmpfs(t, 8<<20)
			dir := filepath.Join(disk, "journal")
			opts := testOptions()
			opts.SegmentSize = 128 << 10
			j := mustOpen(t, dir, opts)
			w := startLiveWriters(t, j, 16, 512)
			stop := make(chan struct{})
			var dg sync.WaitGroup
			dg.Go(func() { toggleDisk(t, disk, w, stop) })
			w.pay(16)
			var rg sync.WaitGroup
			for range 2 {
				rg.Go(func() { readLive(t, dir, liveRounds(), w, 16) })
			}
			rg.Wait()
			close(stop)
			dg.Wait()
			w.halt()
			mustClose(t, j)
			if w.failures.Load() == 0 {
				t.Fatal("no append failed: the disk never filled under the readers")
			}
			t.Logf("%d appends acknowledged, %d failed unwritten", w.okAfter.Load(), w.failures.Load())
		})
	}
}

// toggleDisk fills the disk, waits for an append to fail, frees it, waits
// for one to succeed, and again, until stop.
func toggleDisk(t *testing.T, disk string, w *liveWriters, stop chan struct{}) {
	for {
		filler := fillDiskFast(t, disk)
		select {
		case <-w.written: // one that was under way
		default:
		}
		select {
		case <-stop:
			os.Remove(filler)
			return
		case <-w.failed:
		}
		if err := os.Remove(filler); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-stop:
			return
		case <-w.written:
		}
	}
}

// fillDiskFast is fillDisk in large writes first, then small ones.
func fillDiskFast(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	for _, n := range []int{256 << 10, 4096} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v, want ENOSPC in the end", path, err)
				}
				break
			}
		}
	}
	return path
}
