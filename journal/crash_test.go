package journal

import (
	"errors"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashRun describes one process-death run.
type crashRun struct {
	crashAt   string // the child's crash point; "" = the parent kills it
	after     int    // acknowledged appends before the crash is armed / the kill
	writers   int
	segSize   int64
	wantSync  bool // the crash point guarantees a written, unacknowledged batch
	wantEmpty bool // the crash leaves an empty last segment
}

func TestProcessDeath(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	runs := map[string]crashRun{
		"random-kill-1":   {after: 1 + rng.IntN(300), writers: 8, segSize: 64 << 10},
		"random-kill-2":   {after: 1 + rng.IntN(300), writers: 64, segSize: 64 << 10},
		"random-kill-3":   {after: 1 + rng.IntN(300), writers: 1, segSize: 4096},
		"after-write":     {crashAt: "after-write", after: 1 + rng.IntN(200), writers: 8, segSize: 64 << 10, wantSync: true},
		"after-sync":      {crashAt: "after-sync", after: 1 + rng.IntN(200), writers: 8, segSize: 64 << 10, wantSync: true},
		"segment-created": {crashAt: "segment-created", after: 1 + rng.IntN(50), writers: 4, segSize: 2048, wantEmpty: true},
	}
	for name, r := range runs {
		t.Run(name, func(t *testing.T) { r.run(t) })
	}
}

func (r crashRun) run(t *testing.T) {
	dir := journalDir(t)
	env := []string{"JOURNAL_HELPER=append", "JOURNAL_DIR=" + dir,
		"JOURNAL_WRITERS=" + strconv.Itoa(r.writers), "JOURNAL_SEGMENT_SIZE=" + strconv.FormatInt(r.segSize, 10)}
	if r.crashAt != "" {
		env = append(env, "JOURNAL_CRASH_AT="+r.crashAt, "JOURNAL_CRASH_AFTER="+strconv.Itoa(r.after))
	}
	c := startHelper(t, env...)
	acked := map[uint64]bool{}
	var maxAck uint64
	deadline := time.NewTimer(helperDeadline)
	defer deadline.Stop()
	killed := false
read:
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				break read
			}
			seqText, isAck := strings.CutPrefix(line, "ack ")
			if !isAck {
				if strings.HasPrefix(line, "error") {
					t.Fatalf("child: %s", line)
				}
				continue
			}
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if err != nil {
				t.Fatalf("child line %q", line)
			}
			if acked[seq] {
				t.Fatalf("seq %d acknowledged twice", seq)
			}
			acked[seq] = true
			maxAck = max(maxAck, seq)
			if r.crashAt == "" && !killed && len(acked) >= r.after {
				// Appends are in flight from every writer at this moment.
				if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		case <-deadline.C:
			t.Fatalf("child still running after %v with %d acks", helperDeadline, len(acked))
		}
	}
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want death by SIGKILL; stderr:\n%s", err, c.stderr)
	}
	if len(acked) < r.after {
		t.Fatalf("child died after %d acks, before the %d it was to wait for", len(acked), r.after)
	}

	j := mustOpen(t, dir, testOptions())
	last := j.LastSeq()
	t.Logf("%d acknowledged (max seq %d), %d records on disk, recoveries %+v", len(acked), maxAck, last, j.Recoveries())
	if last < maxAck {
		t.Fatalf("log ends at seq %d but seq %d was acknowledged", last, maxAck)
	}
	if r.wantSync && last == maxAck {
		t.Fatalf("crash at %s: the written, unacknowledged batch is missing (last %d)", r.crashAt, last)
	}
	if r.crashAt != "" && len(j.Recoveries()) != 0 {
		// The process died between syscalls: the page cache holds whole
		// batches, so nothing can be torn.
		t.Fatalf("crash at %s left a torn tail: %+v", r.crashAt, j.Recoveries())
	}
	segs := j.Summary().Segments
	if r.wantEmpty {
		tail := segs[len(segs)-1]
		if tail.Records != 0 || tail.FirstSeq != last+1 {
			t.Fatalf("crash at segment-created: last segment %+v, want an empty one for seq %d", tail, last+1)
		}
	}
	// Every acknowledged record is there, in order, with its body; Open
	// already verified the chain.
	n := uint64(0)
	for _, rec := range collect(t, j, 1) {
		n++
		if rec.Seq != n {
			t.Fatalf("record %d has seq %d", n, rec.Seq)
		}
		if acked[rec.Seq] && rec.Kind != "tick" {
			t.Fatalf("acknowledged record %d has kind %q", rec.Seq, rec.Kind)
		}
		delete(acked, rec.Seq)
	}
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged records missing after the crash", len(acked))
	}
	// The log goes on, and the chain holds across the crash.
	if seq := mustAppend(t, j, "after-crash", 1); seq != last+1 {
		t.Fatalf("first append after the crash = %d, want %d", seq, last+1)
	}
	head := j.Head()
	mustClose(t, j)
	j = mustOpen(t, dir, testOptions())
	defer mustClose(t, j)
	if j.LastSeq() != last+1 || j.Head() != head {
		t.Fatalf("after reopen: seq %d head %x, want %d %x", j.LastSeq(), j.Head(), last+1, head)
	}
}
