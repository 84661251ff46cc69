package controller

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCallFloor is the regression guard of a governed call's cost
// (DESIGN.md section 12): the same text.sha256 call made direct, bare,
// governed over stdio and governed over streamable HTTP in one run, on
// one appliance, so that every ratio is taken under the same load:
//
//	go test -run '^$' -bench 'CallFloor' -benchtime=2000x ./controller/ -floor-json /tmp/floor.json
//
// b.N is the calls each way makes. At one client the ways take turns call
// after call (direct, bare, stdio, http, direct, ...); at 16 in phases of
// 200 calls each, in turn, so that a drift of the machine's load hits all
// ways alike. Per way it reports the median and 99th percentile latency,
// calls/s, and the CPU per call of each process the way involves, read
// from /proc around each phase: ctl (the controller child), bare (the bare
// server child), proxy (the stdio proxies) and self (this process: host,
// appliance and every client). The x-bare ratios compare figures of the
// same rounds; ns/op is a round's wall time over b.N, of no use alone.
func BenchmarkCallFloor(b *testing.B) {
	r := newFloorRig(b, 16, "direct", "bare", "stdio", "http")
	rep := newFloorReport("BenchmarkCallFloor")
	for _, n := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) {
			phase := 1
			if n > 1 {
				phase = 200
			}
			res := runRounds(b, r.ways, n, b.N, phase)
			res.CtlRSSMB = rssMB(r.ctlPID)
			res.report(b)
			b.ReportMetric(res.CtlRSSMB, "ctl-RSS-MB")
			rep.add(res)
		})
	}
	if *floorJSON != "" {
		if err := rep.write(*floorJSON); err != nil {
			b.Fatal(err)
		}
	}
}

var floorJSON = flag.String("floor-json", "", "BenchmarkCallFloor writes every figure as JSON to this file")

// floorFig is one way's figures at one client count.
type floorFig struct {
	Way         string             `json:"way"`
	Clients     int                `json:"clients"`
	Calls       int                `json:"calls"`
	P50ms       float64            `json:"p50Ms"`
	P99ms       float64            `json:"p99Ms"`
	CallsPerSec float64            `json:"callsPerSec"`
	CPUus       map[string]float64 `json:"cpuUsPerCall"` // by process: self, ctl, bare, proxy
	CPUusAll    float64            `json:"cpuUsPerCallAll"`
}

// floorRatio compares a governed way with bare over the same rounds: the
// ratio of the medians and of the rates, and the spread of the rate ratio
// round by round (at one client a round is one call of each way).
type floorRatio struct {
	Way             string  `json:"way"`
	P50             float64 `json:"p50"`
	CallsPerSec     float64 `json:"callsPerSec"`
	RoundRateMedian float64 `json:"roundRateRatioMedian"`
	RoundRateMin    float64 `json:"roundRateRatioMin"`
	RoundRateMax    float64 `json:"roundRateRatioMax"`
}

// floorRun is every figure of one client count.
type floorRun struct {
	Clients  int          `json:"clients"`
	Phase    int          `json:"callsPerPhase"`
	Rounds   int          `json:"rounds"`
	Ways     []floorFig   `json:"ways"`
	Ratios   []floorRatio `json:"xBare"`
	CtlRSSMB float64      `json:"ctlRSSMB,omitempty"`
}

// wayStats accumulates one way's calls over a run.
type wayStats struct {
	durs    []time.Duration
	elapsed time.Duration
	cpu     map[string]time.Duration
	rates   []float64 // calls/s of each phase
}

// runRounds makes calls calls of every way with n clients, in rounds of
// one phase (up to phase calls) of each way in turn.
func runRounds(b *testing.B, ways []*floorWay, n, calls, phase int) *floorRun {
	b.Helper()
	stats := make([]*wayStats, len(ways))
	for i := range stats {
		stats[i] = &wayStats{cpu: map[string]time.Duration{}}
	}
	run := &floorRun{Clients: n, Phase: phase}
	// Unmeasured, a few calls per client of each way first: the first
	// calls of a session pay for what later ones find ready (go-sdk's
	// schema caches, pools, the controller's warm route table).
	for _, w := range ways {
		if err := runPhase(w, n, 5*n, &wayStats{cpu: map[string]time.Duration{}}); err != nil {
			b.Fatalf("%s: warm-up: %v", w.name, err)
		}
	}
	b.ResetTimer()
	for done := 0; done < calls; done += phase {
		k := min(phase, calls-done)
		for i, w := range ways {
			if err := runPhase(w, n, k, stats[i]); err != nil {
				b.Fatalf("%s: %v", w.name, err)
			}
		}
		run.Rounds++
	}
	b.StopTimer()
	for i, w := range ways {
		run.Ways = append(run.Ways, stats[i].fig(w.name, n))
	}
	bare := slices.IndexFunc(ways, func(w *floorWay) bool { return w.name == "bare" })
	for i, w := range ways {
		if bare >= 0 && (w.name == "stdio" || w.name == "http") {
			run.Ratios = append(run.Ratios, ratioOf(w.name, run.Ways[i], run.Ways[bare], stats[i].rates, stats[bare].rates))
		}
	}
	return run
}

// runPhase makes calls calls of w from n clients at once, adding their
// latencies, wall time and CPU to st, then runs w's after.
func runPhase(w *floorWay, n, calls int, st *wayStats) error {
	before, after := map[string]time.Duration{}, map[string]time.Duration{}
	durs := make([][]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Value
	client := func(i int) {
		for next.Add(1) <= int64(calls) {
			t0 := time.Now()
			if err := w.callers[i].call(); err != nil {
				failed.Store(err)
				return
			}
			durs[i] = append(durs[i], time.Since(t0))
		}
	}
	w.readCPU(n, before, false)
	start := time.Now()
	if n == 1 {
		client(0)
	} else {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { client(i) })
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	w.readCPU(n, after, true)
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	for k, v := range after {
		st.cpu[k] += v - before[k]
	}
	st.elapsed += elapsed
	for _, d := range durs {
		st.durs = append(st.durs, d...)
	}
	st.rates = append(st.rates, float64(calls)/elapsed.Seconds())
	if w.after != nil {
		return w.after()
	}
	return nil
}

func (st *wayStats) fig(way string, n int) floorFig {
	all := slices.Clone(st.durs)
	slices.Sort(all)
	f := floorFig{Way: way, Clients: n, Calls: len(all), CPUus: map[string]float64{}}
	if len(all) == 0 {
		return f
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	f.P50ms = ms(all[len(all)/2])
	f.P99ms = ms(all[min(len(all)-1, len(all)*99/100)])
	f.CallsPerSec = float64(len(all)) / st.elapsed.Seconds()
	for k, v := range st.cpu {
		us := float64(v.Microseconds()) / float64(len(all))
		f.CPUus[k] = us
		f.CPUusAll += us
	}
	return f
}

func ratioOf(way string, g, bare floorFig, gRates, bareRates []float64) floorRatio {
	r := floorRatio{Way: way, P50: g.P50ms / bare.P50ms, CallsPerSec: g.CallsPerSec / bare.CallsPerSec}
	var per []float64
	for i := range min(len(gRates), len(bareRates)) {
		per = append(per, gRates[i]/bareRates[i])
	}
	slices.Sort(per)
	if len(per) > 0 {
		r.RoundRateMedian, r.RoundRateMin, r.RoundRateMax = per[len(per)/2], per[0], per[len(per)-1]
	}
	return r
}

// report gives the run's figures as benchmark metrics, named by way:
// "stdio-p50-ms", "stdio-ctl-cpu-us/call", "stdio-x-bare-p50", ...
func (run *floorRun) report(b *testing.B) {
	for _, f := range run.Ways {
		b.ReportMetric(f.P50ms, f.Way+"-p50-ms")
		b.ReportMetric(f.P99ms, f.Way+"-p99-ms")
		b.ReportMetric(f.CallsPerSec, f.Way+"-calls/s")
		for proc, us := range f.CPUus {
			b.ReportMetric(us, f.Way+"-"+proc+"-cpu-us/call")
		}
		b.ReportMetric(f.CPUusAll, f.Way+"-all-cpu-us/call")
	}
	for _, r := range run.Ratios {
		b.ReportMetric(r.P50, r.Way+"-x-bare-p50")
		b.ReportMetric(r.CallsPerSec, r.Way+"-x-bare-calls/s")
	}
}

// floorReport is what -floor-json and -sweep-out write: the runs of the
// last invocation of each sub-benchmark (the one with the final b.N), and
// the machine they ran on.
type floorReport struct {
	Benchmark string     `json:"benchmark"`
	Started   time.Time  `json:"started"`
	GoVersion string     `json:"goVersion"`
	CPUs      int        `json:"cpus"`
	LoadStart string     `json:"loadavgStart"`
	LoadEnd   string     `json:"loadavgEnd,omitempty"`
	Runs      []floorRun `json:"runs"`
}

func newFloorReport(name string) *floorReport {
	return &floorReport{Benchmark: name, Started: time.Now().UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), LoadStart: loadavg()}
}

// add keeps run, replacing an earlier invocation's at its client count.
func (rep *floorReport) add(run *floorRun) {
	rep.Runs = slices.DeleteFunc(rep.Runs, func(r floorRun) bool { return r.Clients == run.Clients })
	rep.Runs = append(rep.Runs, *run)
}

func (rep *floorReport) write(path string) error {
	rep.LoadEnd = loadavg()
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

// loadavg is /proc/loadavg's three averages, for the reader to judge how
// busy the machine was.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
