package journal

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"golang.org/x/sys/unix"
)

// setHooks installs test hooks until the test ends. Tests that use hooks
// do not run in parallel.
func setHooks(t *testing.T, crash func(string), fault func(string) error) {
	t.Helper()
	crashHook, faultHook = crash, fault
	t.Cleanup(func() { crashHook, faultHook = nil, nil })
}

func TestConcurrentAppends(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	const writers, each = 16, 40
	seqs := make([][]uint64, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				seq, err := j.Append("tick", tick{N: i, Note: string(rune('a' + g))})
				if err != nil {
					t.Error(err)
					return
				}
				seqs[g] = append(seqs[g], seq)
			}
		})
	}
	wg.Wait()
	mustClose(t, j)
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if j.LastSeq() != 1+writers*each {
		t.Fatalf("LastSeq %d, want %d", j.LastSeq(), 1+writers*each)
	}
	byseq := map[uint64]tick{}
	for _, r := range collect(t, j, 2) {
		var tk tick
		if err := cbor.Unmarshal(r.Body, &tk); err != nil {
			t.Fatal(err)
		}
		byseq[r.Seq] = tk
	}
	for g, list := range seqs {
		for i, seq := range list {
			if tk := byseq[seq]; tk.N != i || tk.Note != string(rune('a'+g)) {
				t.Fatalf("seq %d holds %+v, want writer %d's append %d", seq, tk, g, i)
			}
			if i > 0 && seq <= list[i-1] {
				t.Fatalf("writer %d: seq %d after %d", g, seq, list[i-1])
			}
		}
	}
}

// TestGroupCommitBatches holds the first write until 15 more appends are
// queued, then checks that they all went out in one write and one fdatasync.
func TestGroupCommitBatches(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	defer mustClose(t, j)
	var writes, syncs atomic.Int32
	inWrite, release := make(chan struct{}), make(chan struct{})
	queued := make(chan struct{}, 64)
	setHooks(t, func(p string) {
		if p == "queued" {
			queued <- struct{}{}
		}
	}, func(p string) error {
		switch p {
		case "write":
			if writes.Add(1) == 1 {
				close(inWrite)
				<-release
			}
		case "sync":
			syncs.Add(1)
		}
		return nil
	})
	var wg sync.WaitGroup
	wg.Go(func() { mustAppend(t, j, "tick", 0) })
	<-inWrite
	const followers = 15
	for i := range followers {
		wg.Go(func() { mustAppend(t, j, "tick", i+1) })
	}
	for range followers {
		<-queued
	}
	close(release)
	wg.Wait()
	if writes.Load() != 2 || syncs.Load() != 2 {
		t.Fatalf("%d writes and %d fdatasyncs for 1+%d appends, want 2 and 2", writes.Load(), syncs.Load(), followers)
	}
	if j.LastSeq() != 2+followers {
		t.Fatalf("LastSeq %d", j.LastSeq())
	}
}

// failBatch appends record 2 and holds its write until five more appends
// (records 3) are queued behind it, with fault installed, and returns the
// six errors and how many writes were tried.
func failBatch(t *testing.T, j *Journal, point string, injected error) ([]error, *atomic.Int32) {
	t.Helper()
	writes := new(atomic.Int32)
	inWrite, release := make(chan struct{}), make(chan struct{})
	queued := make(chan struct{}, 64)
	var once sync.Once
	setHooks(t, func(p string) {
		if p == "queued" {
			queued <- struct{}{}
		}
	}, func(p string) error {
		if p == "write" && writes.Add(1) == 1 {
			close(inWrite)
			<-release
		}
		if p == point {
			fail := false
			once.Do(func() { fail = true })
			if fail {
				return injected
			}
		}
		return nil
	})
	errs := make(chan error, 8)
	appendErr := func(body int) {
		seq, err := j.Append("tick", body)
		if seq != 0 {
			err = errors.Join(err, errors.New("a failed append returned a seq"))
		}
		errs <- err
	}
	go appendErr(2)
	<-inWrite
	for range 5 {
		go appendErr(3)
		<-queued
	}
	close(release)
	var out []error
	for range 6 {
		out = append(out, <-errs)
	}
	return out, writes
}

// TestFailedWriteIsRemoved: a failed write fails every append of its batch
// and of the batches waiting behind it with ErrNotWritten, none of them is
// in the log after a reopen, and the next append is accepted and durable.
func TestFailedWriteIsRemoved(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	mustAppend(t, j, "tick", 1)
	last := j.LastSeq()
	injected := errors.New("injected EIO")
	errs, writes := failBatch(t, j, "write", injected)
	for _, err := range errs {
		if !errors.Is(err, injected) || !errors.Is(err, ErrNotWritten) || strings.Contains(err.Error(), "returned a seq") {
			t.Fatalf("append in a failed batch: %v, want ErrNotWritten with the injected failure and seq 0", err)
		}
	}
	if j.LastSeq() != last || j.Summary().Failure != "" {
		t.Fatalf("LastSeq %d (want %d), failure %q (want none)", j.LastSeq(), last, j.Summary().Failure)
	}
	seq := mustAppend(t, j, "tick", 4)
	if seq != last+1 || writes.Load() != 2 {
		t.Fatalf("append after the failure: seq %d (want %d) after %d writes (want 2)", seq, last+1, writes.Load())
	}
	mustClose(t, j)
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	recs := collect(t, j, last+1)
	if len(recs) != 1 || recs[0].Seq != seq || string(recs[0].Body) != "\x04" {
		t.Fatalf("after reopen: %d records from seq %d (%v), want only seq %d holding 4", len(recs), last+1, recs, seq)
	}
}

// TestFailedSyncStops: a failed fdatasync fails its batch and those behind
// it, and every later append, with ErrFailed, without another write, and
// closes Failed.
func TestFailedSyncStops(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	defer mustClose(t, j)
	mustAppend(t, j, "tick", 1)
	last := j.LastSeq()
	injected := errors.New("injected EIO")
	errs, writes := failBatch(t, j, "sync", injected)
	for _, err := range errs {
		if !errors.Is(err, injected) || !errors.Is(err, ErrFailed) || strings.Contains(err.Error(), "returned a seq") {
			t.Fatalf("append in a failed batch: %v, want ErrFailed with the injected failure and seq 0", err)
		}
	}
	_, err := j.Append("tick", 4)
	want := "journal: stopped for good until it is reopened: " + j.Dir() +
		": what is on disk is unknown: fdatasync " + j.segPath + ": injected EIO"
	if !errors.Is(err, ErrFailed) || err.Error() != want {
		t.Fatalf("append after the failure:\n got %v\nwant %s", err, want)
	}
	if writes.Load() != 1 {
		t.Fatalf("%d writes after the failure, want 1: no retry", writes.Load())
	}
	select {
	case <-j.Failed():
	default:
		t.Fatal("Failed() is not closed after a failed fdatasync")
	}
	if j.LastSeq() != last || j.Summary().Failure != err.Error() {
		t.Fatalf("LastSeq %d (want %d), failure %q", j.LastSeq(), last, j.Summary().Failure)
	}
}

// TestPoisonedByRealEBADF makes the kernel refuse the write: the segment's
// descriptor is replaced by a read-only one, so the removal of what it
// wrote fails too, and the journal stops for good.
func TestPoisonedByRealEBADF(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	ro, err := os.Open(j.segPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := unix.Dup2(int(ro.Fd()), int(j.seg.Fd())); err != nil {
		t.Fatal(err)
	}
	_, err = j.Append("tick", 1)
	if !errors.Is(err, syscall.EBADF) || !errors.Is(err, ErrFailed) {
		t.Fatalf("append to a read-only descriptor: %v, want EBADF and ErrFailed", err)
	}
	if _, err2 := j.Append("tick", 2); !errors.Is(err2, syscall.EBADF) || err2.Error() != err.Error() {
		t.Fatalf("later append: %v, want the same failure %v", err2, err)
	}
	mustClose(t, j)
}

// TestCloseWaitsForAppends: appends racing Close either finish durably or
// get ErrClosed.
func TestCloseWaitsForAppends(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done []uint64
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for {
				seq, err := j.Append("tick", 1)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done = append(done, seq)
				mu.Unlock()
			}
		})
	}
	close(start)
	for {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n >= 50 {
			break
		}
		if _, err := j.Append("pacer", 1); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, j)
	wg.Wait()
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	for _, seq := range done {
		if seq > j.LastSeq() {
			t.Fatalf("acknowledged seq %d missing (log ends at %d)", seq, j.LastSeq())
		}
	}
}

// TestAppendAllocationsDoNotGrow: the cost of an append does not depend on
// how long the log is.
func TestAppendAllocationsDoNotGrow(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random; allocation counts are measured without it")
	}
	j := mustOpen(t, journalDir(t), Options{Owner: testOwner, Format: testFormat})
	defer mustClose(t, j)
	body := make([]byte, 256)
	measure := func() float64 {
		return testing.AllocsPerRun(50, func() {
			if _, err := j.Append("tick", body); err != nil {
				t.Fatal(err)
			}
		})
	}
	early := measure()
	for range 2000 {
		mustAppend(t, j, "tick", body)
	}
	late := measure()
	t.Logf("allocations per append: %.1f early, %.1f after 2000 records", early, late)
	if late > early {
		t.Fatalf("allocations per append grew from %.1f to %.1f with history", early, late)
	}
}
