package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"golang.org/x/sys/unix"

	"github.com/stewardrt/steward/internal/testenv"
)

// The tests here fill a real (tmpfs) file system during appends and check
// what the journal promises: an append that returned an error is not in
// the log after a reopen, the journal takes appends again once space is
// freed, without a restart, and those are the ones that survive.

// fillDisk writes a filler file on the disk at dir until the disk is full and
// returns its path; removing it frees the space.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for i := range chunk {
		chunk[i] = 0xff
	}
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v, want ENOSPC in the end", path, err)
			}
			return path
		}
	}
}

// noFallocate makes every preallocation find no fallocate, as on a file
// system without it, so that segments are sparse.
func noFallocate(t *testing.T) {
	setHooks(t, nil, func(p string) error {
		if p == "fallocate" {
			return unix.EOPNOTSUPP
		}
		return nil
	})
}

// fullBody is a record body with a note long enough that a few records
// fill a page.
func fullBody(n int) tick { return tick{N: n, Note: strings.Repeat("x", 300)} }

// outcome is what the appenders were told.
type outcome struct {
	mu     sync.Mutex
	acked  map[int]uint64 // body N -> seq
	failed map[int]error
}

// appendUntilFull runs writers goroutines that append fullBody records
// with distinct N until each gets an error, which must match
// ErrNotWritten and ENOSPC.
func appendUntilFull(t *testing.T, j *Journal, writers, from int, o *outcome) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				n := from + g*100000 + i
				seq, err := j.Append("tick", fullBody(n))
				o.mu.Lock()
				if err != nil {
					o.failed[n] = err
				} else {
					o.acked[n] = seq
				}
				o.mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for n, err := range o.failed {
		if !errors.Is(err, ErrNotWritten) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append %d on a full disk: %v, want ErrNotWritten and ENOSPC", n, err)
		}
	}
}

// checkLog reopens the journal and checks that it holds exactly the acked
// records (at their seqs) and none of the failed ones.
func checkLog(t *testing.T, dir string, opts Options, o *outcome) {
	t.Helper()
	j := mustOpen(t, dir, opts)
	defer mustClose(t, j)
	if r := j.Recoveries(); len(r) != 0 {
		t.Fatalf("reopen repaired %v; a removed write must leave nothing to repair", r)
	}
	found := map[int]uint64{}
	for _, r := range collect(t, j, 2) {
		var tk tick
		if err := cbor.Unmarshal(r.Body, &tk); err != nil {
			t.Fatal(err)
		}
		found[tk.N] = r.Seq
	}
	for n, err := range o.failed {
		if seq, ok := found[n]; ok {
			t.Fatalf("append %d was reported failed (%v) but is in the log at seq %d", n, err, seq)
		}
	}
	for n, seq := range o.acked {
		if found[n] != seq {
			t.Fatalf("append %d was acknowledged at seq %d but the log has it at %d", n, seq, found[n])
		}
	}
	if len(found) != len(o.acked) {
		t.Fatalf("the log holds %d records after the bind record, %d were acknowledged", len(found), len(o.acked))
	}
}

// fullDiskRun: appends fill the disk, every one that failed is absent after
// a reopen, space is freed and the same open journal takes appends again.
func fullDiskRun(t *testing.T, segSize int64) {
	disk := testenv.SmallTmpfs(t, 512<<10)
	dir := filepath.Join(disk, "journal")
	opts := Options{Owner: testOwner, Format: testFormat, Config: testConfig, SegmentSize: segSize}
	j := mustOpen(t, dir, opts)
	o := &outcome{acked: map[int]uint64{}, failed: map[int]error{}}
	for n := range 20 {
		o.acked[n] = mustAppend(t, j, "tick", fullBody(n))
	}
	filler := fillDisk(t, disk)
	appendUntilFull(t, j, 4, 1000, o)
	t.Logf("%d appends acknowledged, %d failed on the full disk", len(o.acked), len(o.failed))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for n := range 200 {
		seq, err := j.Append("tick", fullBody(500000+n))
		if err != nil {
			t.Fatalf("append %d after space was freed: %v", n, err)
		}
		o.acked[500000+n] = seq
	}
	mustClose(t, j)
	checkLog(t, dir, opts, o)
}

// TestFullDiskSparseSegments: segments without preallocation allocate as
// they are written, so the write that crosses into a page the disk does not
// have comes up short; it is truncated away.
func TestFullDiskSparseSegments(t *testing.T) {
	noFallocate(t)
	fullDiskRun(t, 64<<10)
}

// TestFullDiskPreallocatedSegments: preallocated segments take no space as
// they are written; the disk runs out when the next segment is
// preallocated, and that failure leaves no segment behind.
func TestFullDiskPreallocatedSegments(t *testing.T) {
	fullDiskRun(t, 64<<10)
}

// segmentFiles lists the segment and temporary segment files in dir.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), segSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSegmentCreationFailureLeavesNothing: a rotation whose preallocation
// or fsync fails leaves neither the new segment nor its temporary file,
// the append reports ErrNotWritten, and the next one creates the segment.
func TestSegmentCreationFailureLeavesNothing(t *testing.T) {
	for _, point := range []string{"fallocate", "segment-sync"} {
		t.Run(point, func(t *testing.T) {
			dir := journalDir(t)
			j := mustOpen(t, dir, testOptions())
			for mustAppend(t, j, "tick", fullBody(0)) < 10 && len(j.segs) == 1 {
			}
			before := segmentFiles(t, dir)
			arm := true
			setHooks(t, nil, func(p string) error {
				if p == point && arm {
					arm = false
					return syscall.ENOSPC
				}
				return nil
			})
			var err error
			for len(segmentFiles(t, dir)) == len(before) && err == nil {
				_, err = j.Append("tick", fullBody(1))
			}
			if !errors.Is(err, ErrNotWritten) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append whose segment could not be made: %v, want ErrNotWritten and ENOSPC", err)
			}
			if got := segmentFiles(t, dir); !equalStrings(got, before) {
				t.Fatalf("segment files after the failure %v, want %v", got, before)
			}
			last := j.LastSeq()
			if seq := mustAppend(t, j, "tick", fullBody(2)); seq != last+1 {
				t.Fatalf("next append got seq %d, want %d", seq, last+1)
			}
			mustClose(t, j)
			mustClose(t, mustOpen(t, dir, testOptions()))
		})
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// TestShortWriteRemoved: a write cut short at a chosen byte (inside the
// header, the payload, the padding) is removed: the
// segment reads zeros from the end of the last durable record (preallocated)
// or ends there (sparse), the reopened log lacks the batch, and the next
// append takes its place.
func TestShortWriteRemoved(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		for _, cut := range []int{1, 8, 40, 400, 700} {
			t.Run(fmt.Sprintf("sparse=%v/cut=%d", sparse, cut), func(t *testing.T) {
				dir := journalDir(t)
				if sparse {
					noFallocate(t)
				}
				opts := testOptions()
				opts.SegmentSize = 64 << 10
				j := mustOpen(t, dir, opts)
				mustAppend(t, j, "tick", fullBody(0))
				end := j.segs[0].end
				arm := true
				shortWriteHook = func(want int) (int, error) {
					if !arm {
						return 0, nil
					}
					arm = false
					return min(cut, want), syscall.ENOSPC
				}
				t.Cleanup(func() { shortWriteHook = nil })
				// The batch is one record of about 350 bytes: cuts 400 and
				// 700 fall past it, into the zero padding of a preallocated
				// segment (a sparse one has none, so the whole record is
				// written before the write fails).
				_, err := j.Append("tick", fullBody(1))
				if !errors.Is(err, ErrNotWritten) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append cut at byte %d: %v, want ErrNotWritten and ENOSPC", cut, err)
				}
				data, rerr := os.ReadFile(j.segPath)
				if rerr != nil {
					t.Fatal(rerr)
				}
				if sparse && int64(len(data)) != end {
					t.Fatalf("sparse segment is %d bytes after the removal, want %d (the end of the last durable record)", len(data), end)
				}
				if tail := data[end:]; !bytes.Equal(tail, make([]byte, len(tail))) {
					t.Fatalf("segment holds non-zero bytes after offset %d after the removal", end)
				}
				seq := mustAppend(t, j, "tick", fullBody(2))
				mustClose(t, j)
				o := &outcome{acked: map[int]uint64{0: 2, 2: seq}, failed: map[int]error{1: err}}
				checkLog(t, dir, opts, o)
			})
		}
	}
}
