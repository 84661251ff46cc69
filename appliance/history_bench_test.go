package appliance

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/oracleops"
	"golang.org/x/sys/unix"
)

// The history benchmarks run on a state of N recorded calls, generated
// through the appliance's own code (genCalls: the operation runs and its
// answer is journaled, 64 at once, group-committed) with the journal's
// default 64 MiB segments. N is 10,000 and 100,000, or the list in
// STEWARD_BENCH_CALLS (e.g. 1000000). Each mode of a benchmark is
// measured within the same iteration, one after the other, so that the
// ratios reported compare runs under the same load of the machine.

func benchCalls(b *testing.B) []int {
	v := os.Getenv("STEWARD_BENCH_CALLS")
	if v == "" {
		return []int{10_000, 100_000}
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			b.Fatalf("STEWARD_BENCH_CALLS: %q is not a number of calls", f)
		}
		ns = append(ns, n)
	}
	return ns
}

// benchState is a state directory of n calls, stopped cleanly (its last
// snapshot written, the index synced). With STEWARD_BENCH_STATE_DIR set,
// it is kept there (DIR/calls-N) for the next run, which uses it as it
// finds it: a million calls take minutes to generate.
func benchState(b *testing.B, n int) string {
	b.Helper()
	var state string
	if dir := os.Getenv("STEWARD_BENCH_STATE_DIR"); dir != "" {
		state = filepath.Join(dir, fmt.Sprintf("calls-%d", n))
		if _, err := os.Stat(journalDir(state)); err == nil {
			b.Logf("using the %d calls of %s", n, state)
			return state
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	a := startApp(b, Config{State: state, JournalSegmentSize: -1, Capacity: 64})
	genCalls(b, a.srv, 0, n, 64)
	a.close()
	b.Logf("generated %d calls in %v", n, time.Since(start).Round(time.Millisecond))
	return a.state
}

// timeStart starts and closes an appliance on state, returning how long
// the start took.
func timeStart(b *testing.B, state string) time.Duration {
	b.Helper()
	dir := shortDir(b)
	t0 := time.Now()
	s, err := Start(Config{Socket: filepath.Join(dir, "a.sock"), State: state, Logger: quietLogger(b)})
	d := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return d
}

// oldStart is the start this appliance had before its history: one
// verifying scan, then every record decoded again by Iterate into a map
// of every answer in memory (the code as it was, kept here to measure
// against).
func oldStart(b *testing.B, state string) (time.Duration, int) {
	b.Helper()
	t0 := time.Now()
	j, err := journal.Open(journalDir(state), journal.Options{Owner: journalOwner, Format: journalFormat, Config: journalConfig, Logger: quietLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	type oldAnswer struct {
		bodySHA  [32]byte
		status   int
		response []byte
	}
	answers := map[string]*oldAnswer{}
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != kindAnswer {
			return nil
		}
		a, err := decodeAnswer(r.Body)
		if err != nil {
			return err
		}
		answers[a.RequestID] = &oldAnswer{bodySHA: [32]byte(a.BodySHA256), status: a.Status, response: a.Response}
		return nil
	})
	d := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	j.Close()
	return d, len(answers)
}

// BenchmarkStart: the appliance's start on a state of N calls, four ways
// in each iteration: from the snapshot of the last stop (the normal
// start), by a full replay with the index kept (the snapshots removed),
// by a full rebuild (snapshots and index removed), and the start of the
// appliance before its history (oldStart). Reported in ms, with each
// ratio to the snapshot start.
func BenchmarkStart(b *testing.B) {
	for _, n := range benchCalls(b) {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			state := benchState(b, n)
			var snap, replay, rebuild, old time.Duration
			for b.Loop() {
				d := timeStart(b, state)
				snap += d
				os.RemoveAll(snapshotDir(state))
				d = timeStart(b, state)
				replay += d
				os.RemoveAll(snapshotDir(state))
				os.RemoveAll(filepath.Dir(indexPath(state)))
				d = timeStart(b, state)
				rebuild += d
				d, _ = oldStart(b, state)
				old += d
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(ms(snap), "snapshot-ms")
			b.ReportMetric(ms(replay), "replay-ms")
			b.ReportMetric(ms(rebuild), "rebuild-ms")
			b.ReportMetric(ms(old), "old-ms")
			b.ReportMetric(float64(old)/float64(snap), "old/snapshot")
			b.ReportMetric(float64(replay)/float64(snap), "replay/snapshot")
			b.ReportMetric(float64(rebuild)/float64(snap), "rebuild/snapshot")
		})
	}
}

// BenchmarkRepeatLookup: the ledger's decision on a repeat of a request
// id answered long ago (its entry in the index, its answer read from the
// journal with ReadAt) and of one answered since the last snapshot (in
// memory), interleaved in each iteration, on a state of N calls.
// Reported in us per lookup and as the ratio.
func BenchmarkRepeatLookup(b *testing.B) {
	for _, n := range benchCalls(b) {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			state := benchState(b, n)
			a := startApp(b, Config{State: state, JournalSegmentSize: -1})
			genCall(b, a.srv, n) // recorded since the snapshot: in memory
			if a.srv.ledger.held() != 1 {
				b.Fatalf("%d answers in memory", a.srv.ledger.held())
			}
			sums := map[int][32]byte{}
			for _, i := range []int{0, n / 2, n - 1, n} {
				canon, _ := callBody(i).Encode()
				sums[i] = sha256.Sum256(canon)
			}
			lookup := func(i int) time.Duration {
				t0 := time.Now()
				rec, conflict, p, err := a.srv.ledger.claim(nil, callBody(i).RequestID, sums[i])
				d := time.Since(t0)
				if err != nil || conflict || p != nil || rec == nil || len(rec.response) == 0 {
					b.Fatalf("call %d: %+v %v %v %v", i, rec, conflict, p, err)
				}
				return d
			}
			var oldest, middle, memory time.Duration
			for b.Loop() {
				oldest += lookup(0)
				memory += lookup(n)
				middle += lookup(n / 2)
				memory += lookup(n)
			}
			us := func(d time.Duration, k int) float64 { return float64(d.Nanoseconds()) / 1000 / float64(k*b.N) }
			b.ReportMetric(us(oldest, 1), "oldest-us")
			b.ReportMetric(us(middle, 1), "middle-us")
			b.ReportMetric(us(memory, 2), "memory-us")
			b.ReportMetric(float64(oldest+middle)/float64(memory), "index/memory")
		})
	}
}

// BenchmarkServeRSS: the appliance as its own process on a state of N
// calls, the files' pages evicted from the page cache first
// (FADV_DONTNEED): the time from exec to its ready line, its RSS idle
// after start, the time of the first repeat of the oldest request id
// (the index's and the segment's pages read from the disk) and of the
// second, and its RSS at the worst point, just before the next snapshot is due
// (SnapshotEvery-1 fresh calls answered since the start, all of them in
// memory). RSS is VmRSS (anonymous and file-backed) in MiB.
func BenchmarkServeRSS(b *testing.B) {
	for _, n := range benchCalls(b) {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			state := benchState(b, n)
			var ready, cold, warm time.Duration
			var idle, worst, idleAnon, worstAnon float64
			iter := 0
			for b.Loop() {
				iter++
				evict(b, state)
				dir := shortDir(b)
				sock := filepath.Join(dir, "a.sock")
				t0 := time.Now()
				c := startChild(b, sock, state)
				ready += time.Since(t0)
				rss, anon := procRSS(b, c.cmd.Process.Pid)
				idle, idleAnon = idle+rss, idleAnon+anon
				a := &app{t: b, client: unixClient(sock)}
				// The connection first, so that the repeats time the
				// lookup: the first reads the index's pages and the
				// segment's from the disk, the second from the cache.
				if status, _ := a.do("GET", "/v1/operations/calc.evaluate", nil); status != 200 {
					b.Fatalf("describe: %d", status)
				}
				for k, d := range []*time.Duration{&cold, &warm} {
					t0 = time.Now()
					if status, body := a.invokeBody(callBody(0)); status != 200 {
						b.Fatalf("oldest, repeat %d: %d %s", k, status, body)
					}
					*d += time.Since(t0)
				}
				// Fresh ids, none an earlier iteration or run used (the
				// state may be kept from one): from the clock, in us.
				genHTTP(b, sock, int(time.Now().UnixMicro())+iter*10_000, 10_000-1, 16)
				rss, anon = procRSS(b, c.cmd.Process.Pid)
				worst, worstAnon = worst+rss, worstAnon+anon
				a.client.CloseIdleConnections()
				c.stop(b)
			}
			k := float64(b.N)
			b.ReportMetric(float64(ready.Milliseconds())/k, "ready-ms")
			b.ReportMetric(float64(cold.Microseconds())/1000/k, "oldest-cold-ms")
			b.ReportMetric(float64(warm.Microseconds())/1000/k, "oldest-warm-ms")
			b.ReportMetric(idle/k, "idle-RSS-MiB")
			b.ReportMetric(idleAnon/k, "idle-anon-MiB")
			b.ReportMetric(worst/k, "worst-RSS-MiB")
			b.ReportMetric(worstAnon/k, "worst-anon-MiB")
		})
	}
}

// evict drops the page cache of every file under state (FADV_DONTNEED on
// each), so that a start reads them from the disk.
func evict(b *testing.B, state string) {
	b.Helper()
	err := filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// procRSS is the VmRSS and RssAnon of process pid, in MiB.
func procRSS(b *testing.B, pid int) (rss, anon float64) {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "RssAnon:":
			anon = kb / 1024
		}
	}
	return rss, anon
}

// genHTTP sends calls from to from+n-1 over HTTP to the appliance on
// sock, clients at once.
func genHTTP(b *testing.B, sock string, from, n, clients int) {
	b.Helper()
	next, failed := make(chan int), make(chan string, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			c := unixClient(sock)
			defer c.CloseIdleConnections()
			for i := range next {
				r, _ := oracleops.BuildInvoke(DefaultPrefix, callBody(i))
				req, _ := r.HTTP(context.Background(), "http://appliance")
				resp, err := c.Do(req)
				if err != nil {
					failed <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 500 || resp.StatusCode == 429 {
					failed <- fmt.Sprintf("call %d: status %d", i, resp.StatusCode)
					return
				}
			}
		})
	}
	for i := from; i < from+n; i++ {
		select {
		case next <- i:
		case msg := <-failed:
			b.Fatal(msg)
		}
	}
	close(next)
	wg.Wait()
	select {
	case msg := <-failed:
		b.Fatal(msg)
	default:
	}
}
