package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/internal/testenv"
)

// The tests here check AppendLinked's promise: a linked record that is not
// written stops the journal before anyone is answered, so no record
// appended after it reaches the disk, even once the disk has room again.
// A caller's chain (links numbered 0, 1, 2, ... and appended in that
// order, each built on the one before while it is still being written) is
// therefore a prefix without a gap on disk.

// stopped reports whether Failed is closed.
func stopped(j *Journal) bool {
	select {
	case <-j.Failed():
		return true
	default:
		return false
	}
}

// wantLinkedLoss checks the error of an append whose record is known not
// written because a linked record was lost: ErrFailed and ErrNotWritten
// with the cause, and the journal already stopped when it was returned.
func wantLinkedLoss(t *testing.T, j *Journal, err error, cause error) {
	t.Helper()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrNotWritten) || !errors.Is(err, cause) {
		t.Fatalf("append lost with a linked record: %v, want ErrFailed, ErrNotWritten and %v", err, cause)
	}
	if !stopped(j) {
		t.Fatal("an append lost with a linked record was answered before the journal stopped")
	}
}

// chainOnDisk reopens the journal and returns the link numbers it holds,
// in log order.
func chainOnDisk(t *testing.T, dir string, opts Options) []int {
	t.Helper()
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	var links []int
	for _, r := range collect(t, j, 2) {
		var tk tick
		if err := cbor.Unmarshal(r.Body, &tk); err != nil {
			t.Fatal(err)
		}
		links = append(links, tk.N)
	}
	return links
}

// linkedFullDiskRun: on a real full disk, a linked record fails with
// ENOSPC and stops the journal; once space is freed, the next link still
// fails (ErrFailed alone: nothing was tried), and after a reopen the disk
// holds the links before the lost one and nothing after it.
func linkedFullDiskRun(t *testing.T, segSize int64) {
	disk := testenv.SmallTmpfs(t, 512<<10)
	dir := filepath.Join(disk, "journal")
	opts := Options{Owner: testOwner, Format: testFormat, Config: testConfig, SegmentSize: segSize}
	j := mustOpen(t, dir, opts)
	for n := range 5 {
		if _, err := j.AppendLinked("tick", fullBody(n), nil); err != nil {
			t.Fatalf("link %d: %v", n, err)
		}
	}
	filler := fillDisk(t, disk)
	// A preallocated segment takes appends until the next segment cannot
	// be preallocated; a sparse one fails at the first page it lacks.
	next, acked := 5, 5
	var err error
	for ; err == nil; next++ {
		if _, err = j.AppendLinked("tick", fullBody(next), nil); err == nil {
			acked++
		}
	}
	wantLinkedLoss(t, j, err, syscall.ENOSPC)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	_, err = j.AppendLinked("tick", fullBody(next), nil)
	if !errors.Is(err, ErrFailed) || errors.Is(err, ErrNotWritten) {
		t.Fatalf("the link after the lost one, with space freed: %v, want ErrFailed alone", err)
	}
	if _, err := j.Append("tick", fullBody(next+1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("a plain append after the lost link: %v, want ErrFailed", err)
	}
	mustClose(t, j)
	links := chainOnDisk(t, dir, opts)
	if len(links) != acked {
		t.Fatalf("the disk holds %d links after the reopen, %d were acknowledged: %v", len(links), acked, links)
	}
	for i, n := range links {
		if n != i {
			t.Fatalf("link %d on disk is %d: the chain has a gap (%v)", i, n, links)
		}
	}
	j = mustOpen(t, dir, opts)
	defer mustClose(t, j)
	if _, err := j.AppendLinked("tick", fullBody(acked), nil); err != nil {
		t.Fatalf("the reopened journal refused the next link: %v", err)
	}
}

func TestLinkedLossOnFullDiskSparse(t *testing.T) {
	noFallocate(t)
	linkedFullDiskRun(t, 64<<10)
}

func TestLinkedLossOnFullDiskPreallocated(t *testing.T) {
	linkedFullDiskRun(t, 64<<10)
}

// TestLinkedChainNoGapUnderLoad: four writers take link numbers in order
// under a lock that AppendLinked's framed releases (as the host signs
// receipts), on a real full disk, and the space is freed as soon as the
// first of them fails. Whatever interleaving the group commit makes, the
// disk holds links 0..k-1 exactly, in order: every acknowledged one, none
// that failed, no gap.
func TestLinkedChainNoGapUnderLoad(t *testing.T) {
	noFallocate(t)
	disk := testenv.SmallTmpfs(t, 512<<10)
	dir := filepath.Join(disk, "journal")
	opts := Options{Owner: testOwner, Format: testFormat, Config: testConfig, SegmentSize: 64 << 10}
	j := mustOpen(t, dir, opts)
	filler := fillDisk(t, disk)
	var mu sync.Mutex
	next := 0
	o := &outcome{acked: map[int]uint64{}, failed: map[int]error{}}
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				n := next
				next++
				seq, err := j.AppendLinked("tick", fullBody(n), mu.Unlock)
				o.mu.Lock()
				if err != nil {
					o.failed[n] = err
				} else {
					o.acked[n] = seq
				}
				o.mu.Unlock()
				if err != nil {
					// The disk has room again: a journal that did not
					// stop would now write the links after the lost one.
					once.Do(func() { os.Remove(filler) })
					return
				}
			}
		})
	}
	wg.Wait()
	if !stopped(j) {
		t.Fatal("the journal did not stop after a linked record was lost")
	}
	for n, err := range o.failed {
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("link %d: %v, want ErrFailed", n, err)
		}
	}
	mustClose(t, j)
	links := chainOnDisk(t, dir, opts)
	for i, n := range links {
		if n != i {
			t.Fatalf("link %d on disk is %d: the chain has a gap (%v)", i, n, links)
		}
		if _, ok := o.acked[n]; !ok {
			t.Fatalf("link %d is on disk but was reported failed: %v", n, o.failed[n])
		}
	}
	if len(links) != len(o.acked) {
		t.Fatalf("%d links on disk, %d acknowledged", len(links), len(o.acked))
	}
	t.Logf("%d links acknowledged and on disk, %d failed", len(o.acked), len(o.failed))
}

// holdFirstWrite makes the first batch write wait until release is closed
// and then fail with injected, before writing anything; queued is sent to
// each time an append joins a batch and waits.
func holdFirstWrite(t *testing.T, injected error) (inWrite, release, queued chan struct{}) {
	inWrite, release, queued = make(chan struct{}), make(chan struct{}), make(chan struct{}, 64)
	first := true
	setHooks(t, func(p string) {
		if p == "queued" {
			queued <- struct{}{}
		}
	}, func(p string) error {
		if p == "write" && first {
			first = false
			close(inWrite)
			<-release
			return injected
		}
		return nil
	})
	return inWrite, release, queued
}

// TestLinkedLossStopsBeforeQueuedBatch: a linked record's batch fails
// while a plain append waits in the next batch: that append is answered
// not written, after the journal stopped, and never written.
func TestLinkedLossStopsBeforeQueuedBatch(t *testing.T) {
	dir := journalDir(t)
	j := mustOpen(t, dir, testOptions())
	mustAppend(t, j, "tick", 1)
	inWrite, release, queued := holdFirstWrite(t, syscall.ENOSPC)
	linkedErr, plainErr := make(chan error, 1), make(chan error, 1)
	go func() { _, err := j.AppendLinked("tick", 2, nil); linkedErr <- err }()
	<-inWrite
	go func() { _, err := j.Append("tick", 3); plainErr <- err }()
	<-queued
	close(release)
	wantLinkedLoss(t, j, <-linkedErr, syscall.ENOSPC)
	wantLinkedLoss(t, j, <-plainErr, syscall.ENOSPC)
	mustClose(t, j)
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if n := len(collect(t, j, 3)); n != 0 {
		t.Fatalf("%d records after seq 2 on disk, want none", n)
	}
}

// TestLinkedRecordDroppedStops: a plain batch fails and a linked record
// waits in the batch behind it: dropping the linked record stops the
// journal too, and the failed plain append is told so.
func TestLinkedRecordDroppedStops(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	defer mustClose(t, j)
	inWrite, release, queued := holdFirstWrite(t, syscall.ENOSPC)
	plainErr, linkedErr := make(chan error, 1), make(chan error, 1)
	go func() { _, err := j.Append("tick", 1); plainErr <- err }()
	<-inWrite
	go func() { _, err := j.AppendLinked("tick", 2, nil); linkedErr <- err }()
	<-queued
	close(release)
	wantLinkedLoss(t, j, <-plainErr, syscall.ENOSPC)
	wantLinkedLoss(t, j, <-linkedErr, syscall.ENOSPC)
}

// TestPlainLossDoesNotStop: without a linked record a removed write only
// fails its batch; the journal goes on (the contract of Append).
func TestPlainLossDoesNotStop(t *testing.T) {
	j := mustOpen(t, journalDir(t), testOptions())
	defer mustClose(t, j)
	inWrite, release, _ := holdFirstWrite(t, syscall.ENOSPC)
	plainErr := make(chan error, 1)
	go func() { _, err := j.Append("tick", 1); plainErr <- err }()
	<-inWrite
	close(release)
	if err := <-plainErr; !errors.Is(err, ErrNotWritten) || errors.Is(err, ErrFailed) || stopped(j) {
		t.Fatalf("plain append on a failed write: %v (stopped %v), want ErrNotWritten alone, journal going on", err, stopped(j))
	}
	mustAppend(t, j, "tick", 2)
}

// TestLinkedRefusedRecordStops: a linked record refused before it is
// framed (too large, an invalid kind) is not written either: the journal
// stops, and the refusal keeps its own error.
func TestLinkedRefusedRecordStops(t *testing.T) {
	for _, c := range []struct {
		name string
		kind string
		body any
		want error
	}{
		{"too-large", "tick", strings.Repeat("x", MaxRecordBytes), ErrRecordTooLarge},
		{"bad-kind", "no spaces", 1, ErrInvalidRecord},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := mustOpen(t, journalDir(t), testOptions())
			defer mustClose(t, j)
			_, err := j.AppendLinked(c.kind, c.body, nil)
			wantLinkedLoss(t, j, err, c.want)
			if _, err := j.Append("tick", 1); !errors.Is(err, ErrFailed) {
				t.Fatalf("append after the refused link: %v, want ErrFailed", err)
			}
		})
	}
}

// TestFailpointNamesAgree: the journal reads the failpoint variable and
// name that package failpoint documents, which it cannot import.
func TestFailpointNamesAgree(t *testing.T) {
	if failpointEnv != failpoint.Env || failpointFdatasync != failpoint.JournalFdatasync {
		t.Fatalf("journal reads %s=%s, failpoint names %s=%s", failpointEnv, failpointFdatasync, failpoint.Env, failpoint.JournalFdatasync)
	}
}
