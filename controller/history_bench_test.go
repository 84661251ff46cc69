package controller

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
)

// The controller's start at N calls (DESIGN.md section 13, issue P2.2):
//
//	go test -run '^$' -bench 'ControllerStart' -benchtime 1x ./controller/
//	STEWARD_BENCH_CALLS=10000,1000000 go test -run '^$' -bench 'ControllerStart' -benchtime 1x -timeout 60m ./controller/
//
// One op is startsPerOp starts of one journal (-benchtime 1x: a larger N
// makes the testing package build the journal again for its first probe).
// The journal is of real records: one call made through the stack, its
// begin and result appended again N-1 times with fresh attempt ids and
// requestIds. The controller's start is measured at the worst point: the
// last snapshot DefaultEvery-2 records behind the journal's end, so that
// the start replays the most it ever does and the live ledger holds the
// most; it runs as its own process (the real binary), is SIGKILLed once
// ready (no last snapshot: every start is at the same point) and its
// /proc status read at ready.

// startsPerOp is how many starts one op of BenchmarkControllerStart
// measures, averaged (the RSS figures are the largest).
const startsPerOp = 3

// benchCalls are the journal sizes, in calls, of BenchmarkControllerStart.
func benchCalls(b *testing.B) []int {
	s := os.Getenv("STEWARD_BENCH_CALLS")
	if s == "" {
		return []int{10_000, 100_000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			b.Fatalf("STEWARD_BENCH_CALLS: %q is not a number of calls", f)
		}
		out = append(out, n)
	}
	return out
}

// realPair is the begin and result of one real call through s.
func realPair(b testing.TB, s *stack) (ledger.Begin, ledger.Result) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s.startController()
	call(b, ctx, s.client(ctx), ToolCall, callArgs("real-1", map[string]any{"text": "a real call"}))
	s.stopController()
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var bg ledger.Begin
	var res ledger.Result
	err = j.Iterate(1, func(r journal.Record) error {
		switch r.Kind {
		case ledger.KindBegin:
			return ledger.Decode(r, &bg)
		case ledger.KindResult:
			return ledger.Decode(r, &res)
		}
		return nil
	})
	if err != nil || res.Attempt == "" {
		b.Fatalf("the real call's records: %v", err)
	}
	return bg, res
}

// appendCalls appends n more calls like bg and res to the stack's journal,
// from 256 appenders at once (the journal commits them in groups).
func appendCalls(b testing.TB, s *stack, bg ledger.Begin, res ledger.Result, from, n int) {
	_, raw, err := LoadConfig(s.cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	j, err := openJournal(s.cfg, raw, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 256)
	for w := range 256 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 256 {
				b2, r2 := bg, res
				b2.Attempt = fmt.Sprintf("%032x", i)
				b2.RequestID = "gen-" + strconv.Itoa(i)
				r2.Attempt = b2.Attempt
				if _, err := j.Append(ledger.KindBegin, b2); err != nil {
					errs <- err
					return
				}
				if _, err := j.Append(ledger.KindResult, r2); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// startFigures are one start of the real binary.
type startFigures struct {
	ready, cpu      time.Duration // wall time to ready, and the process's CPU time (user and system) at ready
	rss, anon, file float64       // MiB at ready (VmRSS, RssAnon, RssFile)
	replayed        uint64        // records replayed after the snapshot
}

// startChildOnce starts the binary, waits for its ready line, reads its
// /proc status, SIGKILLs it and returns what it measured.
func startChildOnce(b *testing.B, s *stack) startFigures {
	cmd := exec.Command(controllerBin(b), "serve", "--config", s.cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var f startFigures
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "replayed="); i >= 0 {
			f.replayed, _ = strconv.ParseUint(strings.Fields(line[i+len("replayed="):])[0], 10, 64)
		}
		if i := strings.Index(line, "records="); i >= 0 && strings.Contains(line, "whole journal") {
			f.replayed, _ = strconv.ParseUint(strings.Fields(line[i+len("records="):])[0], 10, 64)
		}
		if strings.Contains(line, "controller ready") {
			f.ready = time.Since(t0)
			break
		}
	}
	if f.ready == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatal("the controller exited before it was ready")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// utime and stime, fields 14 and 15, in clock ticks (100 a second),
	// after the command name's closing parenthesis.
	if fs := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:])); len(fs) > 12 {
		u, _ := strconv.Atoi(fs[11])
		s, _ := strconv.Atoi(fs[12])
		f.cpu = time.Duration(u+s) * 10 * time.Millisecond
	}
	for _, l := range strings.Split(string(status), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fs[1], 64)
		switch fs[0] {
		case "VmRSS:":
			f.rss = kb / 1024
		case "RssAnon:":
			f.anon = kb / 1024
		case "RssFile:":
			f.file = kb / 1024
		}
	}
	cmd.Process.Kill()
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	return f
}

// BenchmarkControllerStart: the start of the controller with a journal of
// N calls, at the worst point before the next snapshot, and the reading
// of the oldest requestId's answer there (its index lookup and ReadAt).
func BenchmarkControllerStart(b *testing.B) {
	for _, n := range benchCalls(b) {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			s := newStack(b, stackOpts{})
			bg, res := realPair(b, s)
			appendCalls(b, s, bg, res, 0, n-1)
			// The first start replays everything and snapshots at once;
			// then records up to the worst point.
			s.startController()
			s.stopController()
			snapAt := s.lastSeq()
			appendCalls(b, s, bg, res, n, (history.DefaultEvery-2)/2)
			if s.lastSeq()-snapAt != history.DefaultEvery-2 {
				b.Fatalf("%d records past the snapshot", s.lastSeq()-snapAt)
			}
			b.ResetTimer()
			var sum startFigures
			for range b.N * startsPerOp {
				f := startChildOnce(b, s)
				sum.ready += f.ready
				sum.cpu += f.cpu
				sum.rss, sum.anon, sum.file = max(sum.rss, f.rss), max(sum.anon, f.anon), max(sum.file, f.file)
				sum.replayed = f.replayed
			}
			b.StopTimer()
			b.ReportMetric(float64(sum.ready.Milliseconds())/float64(b.N*startsPerOp), "ms/start")
			b.ReportMetric(float64(sum.cpu.Milliseconds())/float64(b.N*startsPerOp), "cpu-ms/start")
			b.ReportMetric(sum.rss, "MiB-rss")
			b.ReportMetric(sum.anon, "MiB-anon")
			b.ReportMetric(sum.file, "MiB-file")
			b.ReportMetric(float64(sum.replayed), "replayed")
			ms, idxMiB := oldestAnswerMs(b, s, bg)
			b.ReportMetric(ms, "ms/oldest-answer")
			b.ReportMetric(idxMiB, "MiB-index-mapped-after-5000-new")
		})
	}
}

// oldestAnswerMs opens the controller in this process (from its snapshot)
// and times deciding a call with the journal's oldest requestId and
// reading its answer: the index lookup, ReadAt and decoding. Then it
// looks up DefaultEvery/2 new requestIds (the calls of one snapshot
// interval, each a miss that walks the index to a leaf) and returns how
// much of the index file is then mapped in (its Rss in smaps): the file
// pages a running controller holds at the worst point.
func oldestAnswerMs(b *testing.B, s *stack, bg ledger.Begin) (float64, float64) {
	c, err := open(s.cfgPath, slog.New(slog.DiscardHandler), historyOpts{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bg.Attempt = "replay-of-the-oldest"
	t0 := time.Now()
	p, ok := c.led.Begin(bg)
	if ok || p.Err != nil {
		b.Fatalf("the oldest requestId decides nothing: %+v %v", p, ok)
	}
	t := c.replay("", p.Attempt, p.Answer)
	d := time.Since(t0)
	if !t.Replayed {
		b.Fatalf("the oldest answer: %+v", t)
	}
	for i := range history.DefaultEvery / 2 {
		nb := bg
		nb.Attempt, nb.RequestID = fmt.Sprintf("new-%d", i), fmt.Sprintf("fresh-%d", i)
		if _, ok := c.led.Begin(nb); !ok {
			b.Fatalf("a new requestId was decided")
		}
		c.led.Abort(nb.Attempt)
	}
	return float64(d.Microseconds()) / 1000, mappedMiB(b, IndexPath(s.cfg))
}

// mappedMiB is the Rss of this process's mappings of file, in MiB.
func mappedMiB(b *testing.B, file string) float64 {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		b.Fatal(err)
	}
	kb, in := 0.0, false
	for _, l := range strings.Split(string(smaps), "\n") {
		fs := strings.Fields(l)
		switch {
		case len(fs) >= 6 && strings.Contains(fs[0], "-"):
			in = fs[len(fs)-1] == file
		case in && len(fs) >= 2 && fs[0] == "Rss:":
			v, _ := strconv.ParseFloat(fs[1], 64)
			kb += v
		}
	}
	return kb / 1024
}
